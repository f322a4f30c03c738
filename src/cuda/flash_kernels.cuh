// The block-sparse flash kernels: forward (O, LSE), the backward's D pre-pass, its dK/dV kernel
// over key-tile columns and its dQ kernel over query-tile rows. No atomics: every output element
// is written by one thread, after summing its terms in a fixed order, so results are deterministic.
//
// Deliberately plain: fp32 tiles in shared memory, every product a loop of fp32 FMAs over shared
// memory, one block of kFlashThreads threads per outer tile and head, __syncthreads() between the
// phases. A dot product of a thread starts at element (its row mod length) so that the threads of
// a warp, which take consecutive rows of the same operand, hit different banks.
//
// The kernel bodies live in this header so that tests/cuda_emulation can compile them for the host
// (one thread per block, __syncthreads a no-op) and run the device tests' cases on a CPU; the
// launchers are in flash_kernels.cu.
#pragma once

#include "cuda/flash_kernels.hpp"

namespace spattn::cuda::detail::flash_device {

using namespace spattn::tile_math;

#ifndef SPATTN_FLASH_EMULATION
// The block's dynamic shared memory (its size is set at launch).
__device__ __forceinline__ float* dynamic_smem() {
  extern __shared__ float4 smem_raw[];
  return reinterpret_cast<float*>(smem_raw);
}
#else
float* dynamic_smem();  // the emulation's buffer
#endif

__device__ __forceinline__ float rotated_dot(const float* a, const float* b, int64_t n, int64_t start) {
  float sum = 0.0f;
  int64_t x = start % n;
  for (int64_t j = 0; j < n; ++j) {
    sum = fmaf(a[x], b[x], sum);
    if (++x == n) x = 0;
  }
  return sum;
}

// dst (rows, cols) row-major in shared memory = rows [s0, s0 + rows) of head (b, h) as fp32.
template <typename T>
__device__ inline void load_rows(float* dst, const Strided<const T>& src, int64_t b, int64_t h, int64_t s0,
                          int64_t rows, int64_t cols) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int64_t r = i / cols, x = i % cols;
    dst[i] = load_float(src.at(b, h, s0 + r, x));
  }
}

template <typename T>
__device__ inline void store_rows(const Strided<T>& dst, const float* src, int64_t b, int64_t h, int64_t s0,
                           int64_t rows, int64_t cols, float factor) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int64_t r = i / cols, x = i % cols;
    store_float(dst.at(b, h, s0 + r, x), src[i] * factor);
  }
}

__device__ inline void fill(float* dst, int64_t count, float value) {
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) dst[i] = value;
}

// A partial tile's bit set, copied to shared memory; returns it (nullptr for a full tile).
__device__ inline const uint64_t* load_bits(uint64_t* dst, const uint64_t* src, int64_t words) {
  if (src == nullptr) return nullptr;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) dst[w] = src[w];
  return dst;
}

// out (rows, cols) = out * alpha (per row, when alpha != nullptr) + w b, for w (rows, inner) at row
// stride ldw and b (inner, cols): one thread per output element, the inner sum in order.
__device__ inline void accumulate(float* out, int64_t rows, int64_t cols, const float* w, int64_t ldw, int64_t inner,
                           const float* b, const float* alpha) {
  for (int64_t i = threadIdx.x; i < rows * cols; i += blockDim.x) {
    const int64_t o = i / cols, x = i % cols;
    float a = alpha != nullptr ? out[i] * alpha[o] : out[i];
    for (int64_t j = 0; j < inner; ++j) a = fmaf(w[o * ldw + j], b[j * cols + x], a);
    out[i] = a;
  }
}

// LSE and D of query rows [q0, q0 + rows) of head (b, h).
__device__ inline void load_row_stats(float* lse_out, float* delta_out, const Strided<const float>& lse, const float* delta,
                               const FlashDims& n, int64_t b, int64_t h, int64_t q0, int64_t rows) {
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    lse_out[r] = *lse.at(b, h, q0 + r, 0);
    delta_out[r] = delta[(b * n.heads + h) * n.seqlen_q + q0 + r];
  }
}

// The query tile and head of a forward or dQ block (grid: query tiles x batch * heads) and the kv
// head it reads: tile, b, h, hk, first row q0 and rows_q rows (fewer in the last tile).
struct QueryBlock {
  int64_t tile, b, h, hk, q0, rows_q;
};
__device__ inline QueryBlock query_block(const FlashDims& n, int64_t block_q) {
  const int64_t tile = blockIdx.x, b = blockIdx.y / n.heads, h = blockIdx.y % n.heads;
  return {tile, b, h, kv_head_of(h, n.heads, n.kv_heads), tile * block_q, tile_rows(n.seqlen_q, block_q, tile)};
}

// A forward or dQ block's next key tile: waits until the previous tile's K, V, scores and bits are
// no longer read, loads the tile's bits (partial tiles) and rows_k rows of K and V of kv head
// (b, hk), and waits for the loads. Returns the bits in shared memory (nullptr: a full tile).
template <typename Params>
__device__ inline const uint64_t* load_key_tile(const Params& p, const VisitedTile& visited, int64_t b, int64_t hk,
                                                int64_t rows_k, uint64_t* bit_buffer, float* sk, float* sv) {
  const int64_t k0 = visited.tile * p.block_k;
  __syncthreads();
  const uint64_t* bits = load_bits(bit_buffer, visited.bits, p.lists.bit_words);
  load_rows(sk, p.k, b, hk, k0, rows_k, p.dims.d);
  load_rows(sv, p.v, b, hk, k0, rows_k, p.dims.e);
  __syncthreads();
  return bits;
}

template <typename T>
__global__ void __launch_bounds__(kFlashThreads) forward_kernel(const ForwardParams<T> p) {
  float* smem = dynamic_smem();
  const device::ForwardLayout& L = p.layout;
  uint64_t* bit_buffer = reinterpret_cast<uint64_t*>(smem + L.bits);
  float *sq = smem + L.q, *acc = smem + L.acc, *row_max = smem + L.row_max;
  float *row_sum = smem + L.row_sum, *alpha = smem + L.alpha, *sk = smem + L.k, *sv = smem + L.v;
  float* s = smem + L.s;  // (rows_q, block_k)
  const FlashDims& n = p.dims;
  const auto [tile, b, h, hk, q0, rows_q] = query_block(n, p.block_q);
  const int64_t bk = p.block_k;

  load_rows(sq, p.q, b, h, q0, rows_q, n.d);
  fill(acc, rows_q * n.e, 0.0f);
  fill(row_max, rows_q, negative_infinity());
  fill(row_sum, rows_q, 0.0f);
  for (ListWalk walk = start_walk(p.lists, mask_of_head(p.lists, h), tile); walk.pos < walk.end;) {
    const VisitedTile visited = next_tile(p.lists, walk);
    const int64_t rows_k = tile_rows(n.seqlen_k, bk, visited.tile);
    const uint64_t* bits = load_key_tile(p, visited, b, hk, rows_k, bit_buffer, sk, sv);
    // S = scale Q K^T; a pair outside the mask is -inf exactly (its product is skipped).
    for (int64_t i = threadIdx.x; i < rows_q * rows_k; i += blockDim.x) {
      const int64_t r = i / rows_k, c = i % rows_k;
      s[r * bk + c] = element_attends(bits, p.lists.inner_block, r, c)
                          ? n.scale * rotated_dot(sq + r * n.d, sk + c * n.d, n.d, c)
                          : negative_infinity();
    }
    __syncthreads();
    // The online softmax, one thread per query row: P overwrites S.
    for (int64_t r = threadIdx.x; r < rows_q; r += blockDim.x) {
      float block_max = negative_infinity();
      for (int64_t c = 0; c < rows_k; ++c) block_max = fmaxf(block_max, s[r * bk + c]);
      const SoftmaxStep step = online_softmax_step(row_max[r], block_max);
      float sum = 0.0f;
      for (int64_t c = 0; c < rows_k; ++c) {
        const float e = expf(s[r * bk + c] - step.shift);
        s[r * bk + c] = e;
        sum += e;
      }
      row_sum[r] = row_sum[r] * step.alpha + sum;
      row_max[r] = step.max;
      alpha[r] = step.alpha;
    }
    __syncthreads();
    accumulate(acc, rows_q, n.e, s, bk, rows_k, sv, alpha);  // acc = acc alpha + P V
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < rows_q * n.e; i += blockDim.x) {
    const int64_t r = i / n.e, x = i % n.e;
    store_float(p.o.at(b, h, q0 + r, x), finish_output(acc[i], row_sum[r]));
  }
  for (int64_t r = threadIdx.x; r < rows_q; r += blockDim.x) {
    *p.lse.at(b, h, q0 + r, 0) = finish_lse(row_max[r], row_sum[r]);
  }
}

template <typename T>
__global__ void delta_kernel(const DeltaParams<T> p) {
  const FlashDims& n = p.dims;
  const int64_t total = n.batch * n.heads * n.seqlen_q;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i % n.seqlen_q, bh = i / n.seqlen_q, b = bh / n.heads, h = bh % n.heads;
    float sum = 0.0f;
    for (int64_t x = 0; x < n.e; ++x) {
      sum = fmaf(load_float(p.d_o.at(b, h, row, x)), load_float(p.o.at(b, h, row, x)), sum);
    }
    p.delta[i] = sum;
  }
}

// Per key tile of kv head hk: every q head of its group, every query tile of that head's list.
template <typename T>
__global__ void __launch_bounds__(kFlashThreads) dkdv_kernel(const DkdvParams<T> p) {
  float* smem = dynamic_smem();
  const device::DkdvLayout& L = p.layout;
  uint64_t* bit_buffer = reinterpret_cast<uint64_t*>(smem + L.bits);
  float *sk = smem + L.k, *sv = smem + L.v, *dk = smem + L.dk, *dv = smem + L.dv;
  float *sq = smem + L.q, *sdo = smem + L.d_o, *slse = smem + L.lse, *sdelta = smem + L.delta;
  float* ps = smem + L.p;  // (rows_k, block_q): P, then dS
  const FlashDims& n = p.dims;
  const int64_t tile = blockIdx.x, b = blockIdx.y / n.kv_heads, hk = blockIdx.y % n.kv_heads;
  const int64_t k0 = tile * p.block_k, rows_k = tile_rows(n.seqlen_k, p.block_k, tile);
  const int64_t bq = p.block_q, group = n.heads / n.kv_heads;

  load_rows(sk, p.k, b, hk, k0, rows_k, n.d);
  load_rows(sv, p.v, b, hk, k0, rows_k, n.e);
  fill(dk, rows_k * n.d, 0.0f);
  fill(dv, rows_k * n.e, 0.0f);
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    for (ListWalk walk = start_walk(p.lists, mask_of_head(p.lists, h), tile); walk.pos < walk.end;) {
      const VisitedTile visited = next_tile(p.lists, walk);
      const int64_t q0 = visited.tile * bq, rows_q = tile_rows(n.seqlen_q, bq, visited.tile);
      __syncthreads();  // the previous query tile is no longer read
      const uint64_t* bits = load_bits(bit_buffer, visited.bits, p.lists.bit_words);
      load_rows(sq, p.q, b, h, q0, rows_q, n.d);
      load_rows(sdo, p.d_o, b, h, q0, rows_q, n.e);
      load_row_stats(slse, sdelta, p.lse, p.delta, n, b, h, q0, rows_q);
      __syncthreads();
      // P, keys along the outer tile (bit c * inner_block + r)
      for (int64_t i = threadIdx.x; i < rows_k * rows_q; i += blockDim.x) {
        const int64_t c = i / rows_q, r = i % rows_q;
        ps[c * bq + r] = element_attends(bits, p.lists.inner_block, c, r)
                             ? probability(n.scale * rotated_dot(sq + r * n.d, sk + c * n.d, n.d, r), slse[r])
                             : 0.0f;
      }
      __syncthreads();
      accumulate(dv, rows_k, n.e, ps, bq, rows_q, sdo, nullptr);  // dV += P^T dO
      __syncthreads();
      // dS = P (dO V^T - D), in place
      for (int64_t i = threadIdx.x; i < rows_k * rows_q; i += blockDim.x) {
        const int64_t c = i / rows_q, r = i % rows_q;
        const float prob = ps[c * bq + r];
        ps[c * bq + r] = prob == 0.0f ? 0.0f
                                      : score_gradient(prob, rotated_dot(sdo + r * n.e, sv + c * n.e, n.e, r),
                                                       sdelta[r]);
      }
      __syncthreads();
      accumulate(dk, rows_k, n.d, ps, bq, rows_q, sq, nullptr);  // dK += dS^T Q (scaled at the end)
    }
  }
  __syncthreads();
  store_rows(p.dk, dk, b, hk, k0, rows_k, n.d, n.scale);
  store_rows(p.dv, dv, b, hk, k0, rows_k, n.e, 1.0f);
}

template <typename T>
__global__ void __launch_bounds__(kFlashThreads) dq_kernel(const DqParams<T> p) {
  float* smem = dynamic_smem();
  const device::DqLayout& L = p.layout;
  uint64_t* bit_buffer = reinterpret_cast<uint64_t*>(smem + L.bits);
  float *sq = smem + L.q, *sdo = smem + L.d_o, *slse = smem + L.lse, *sdelta = smem + L.delta;
  float *dq = smem + L.dq, *sk = smem + L.k, *sv = smem + L.v;
  float* ds = smem + L.p;  // (rows_q, block_k)
  const FlashDims& n = p.dims;
  const auto [tile, b, h, hk, q0, rows_q] = query_block(n, p.block_q);
  const int64_t bk = p.block_k;

  load_rows(sq, p.q, b, h, q0, rows_q, n.d);
  load_rows(sdo, p.d_o, b, h, q0, rows_q, n.e);
  load_row_stats(slse, sdelta, p.lse, p.delta, n, b, h, q0, rows_q);
  fill(dq, rows_q * n.d, 0.0f);
  for (ListWalk walk = start_walk(p.lists, mask_of_head(p.lists, h), tile); walk.pos < walk.end;) {
    const VisitedTile visited = next_tile(p.lists, walk);
    const int64_t rows_k = tile_rows(n.seqlen_k, bk, visited.tile);
    const uint64_t* bits = load_key_tile(p, visited, b, hk, rows_k, bit_buffer, sk, sv);
    // dS = P (dO V^T - D), P = e^{scale Q K^T - LSE}
    for (int64_t i = threadIdx.x; i < rows_q * rows_k; i += blockDim.x) {
      const int64_t r = i / rows_k, c = i % rows_k;
      float grad = 0.0f;
      if (element_attends(bits, p.lists.inner_block, r, c)) {
        const float prob = probability(n.scale * rotated_dot(sq + r * n.d, sk + c * n.d, n.d, c), slse[r]);
        if (prob != 0.0f) {
          grad = score_gradient(prob, rotated_dot(sdo + r * n.e, sv + c * n.e, n.e, c), sdelta[r]);
        }
      }
      ds[r * bk + c] = grad;
    }
    __syncthreads();
    accumulate(dq, rows_q, n.d, ds, bk, rows_k, sk, nullptr);  // dQ += dS K (scaled at the end)
  }
  __syncthreads();
  store_rows(p.dq, dq, b, h, q0, rows_q, n.d, n.scale);
}

}  // namespace spattn::cuda::detail::flash_device
