// The tensor-core flash kernels for fp16 / bf16 inputs: forward (O, LSE), dK/dV over key tiles and
// dQ over query tiles, over the pieces of mma_common.cuh (which says how the warps share a tile and
// what stays fp32). No atomics: each output element is summed by one warp in a fixed order. Like
// flash_kernels.cuh, the bodies compile for the host (tests/cuda_emulation).
#pragma once

#include "cuda/mma_common.cuh"

namespace spattn::cuda::detail::mma_device {

using namespace spattn::tile_math;
using flash_device::load_bits;
using flash_device::query_block;

template <typename T, int Dim>
__global__ void __launch_bounds__(kMmaThreads) mma_forward_kernel(const ForwardParams<T> p) {
  constexpr MmaLayout L = mma_layout(Dim, Pass::forward);
  char* smem = reinterpret_cast<char*>(flash_device::dynamic_smem());
  uint64_t* bit_buffer = at<uint64_t*>(smem, 0);
  T *sq = at<T*>(smem, L.a), *sk = at<T*>(smem, L.b), *sv = at<T*>(smem, L.c), *sp = at<T*>(smem, L.p);
  float *s = at<float*>(smem, L.s), *acc = at<float*>(smem, L.acc);
  float *row_max = at<float*>(smem, L.stat0), *row_sum = at<float*>(smem, L.stat1);
  const FlashDims& n = p.dims;
  const auto [tile, b, h, hk, q0, rows_q] = query_block(n, kMmaTile);

  load_tile(sq, L.ld16, Dim, p.q, b, h, q0, rows_q, n.d);
  for (int i = threadIdx.x; i < kMmaTile * L.ld_acc; i += blockDim.x) acc[i] = 0.0f;
  for (int r = threadIdx.x; r < kMmaTile; r += blockDim.x) {
    row_max[r] = negative_infinity();
    row_sum[r] = 0.0f;
  }
  __syncthreads();
  // The strip's Q operands stay in registers for every key tile.
  FragA<T> q_frags[kSlots][Dim / 16];
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const int r0 = kMmaStrip * (warp_index() + slot * kWarps);
#pragma unroll
    for (int kk = 0; kk < Dim / 16; ++kk) wmma::load_matrix_sync(q_frags[slot][kk], as_wmma(sq + r0 * L.ld16 + 16 * kk), L.ld16);
  }
  for (KeyStream<T, Dim> keys(p, b, h, hk, tile); keys.more;) {
    const StreamedTile current = keys.advance(p, bit_buffer, sk, sv, L.ld16);
    const int64_t rows_k = current.rows;
    const uint64_t* bits = current.bits;
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      const int r0 = kMmaStrip * (warp_index() + slot * kWarps);
      if (r0 >= rows_q) continue;  // the whole strip is past the last query row
      // S = Q K^T for the strip's 16 rows, all 64 keys.
#pragma unroll
      for (int j = 0; j < kMmaTile / 16; ++j) {
        FragAcc scores;
        wmma::fill_fragment(scores, 0.0f);
#pragma unroll
        for (int kk = 0; kk < Dim / 16; ++kk) {
          FragBt<T> keys;
          wmma::load_matrix_sync(keys, as_wmma(sk + 16 * j * L.ld16 + 16 * kk), L.ld16);
          wmma::mma_sync(scores, q_frags[slot][kk], keys, scores);
        }
        wmma::store_matrix_sync(s + r0 * L.ld_s + 16 * j, scores, L.ld_s, wmma::mem_row_major);
      }
      __syncwarp();
      // The online softmax: kRowLanes lanes per row, each over kRowCols keys; P (16-bit) and the
      // rescaled O row. The row's lanes read its max and sum before one of them writes them.
      for (int r = r0 + lane_index() / kRowLanes; r < r0 + kMmaStrip; r += kRowStep) {
        const int c0 = (lane_index() % kRowLanes) * kRowCols;
        const float* srow = s + r * L.ld_s + c0;
        float x[kRowCols];
#pragma unroll
        for (int i = 0; i < kRowCols; i += 4) {
          const float4 four = *reinterpret_cast<const float4*>(srow + i);
          x[i] = four.x, x[i + 1] = four.y, x[i + 2] = four.z, x[i + 3] = four.w;
        }
        float block_max = negative_infinity();
#pragma unroll
        for (int i = 0; i < kRowCols; ++i) {
          const int c = c0 + i;
          x[i] = (r < rows_q && c < rows_k && element_attends(bits, kMmaTile, r, c)) ? n.scale * x[i]
                                                                                   : negative_infinity();
          block_max = fmaxf(block_max, x[i]);
        }
        block_max = pair_max(block_max);
        const SoftmaxStep step = online_softmax_step(row_max[r], block_max);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kRowCols; ++i) {
          const float e = expf(x[i] - step.shift);
          store_float(sp + r * L.ld_p + c0 + i, e);
          sum += e;
        }
        sum = pair_sum(sum);
        float* orow = acc + r * L.ld_acc + (lane_index() % kRowLanes) * (Dim / kRowLanes);
#pragma unroll
        for (int c = 0; c < Dim / kRowLanes; c += 4) {
          float4 four = *reinterpret_cast<float4*>(orow + c);
          four.x *= step.alpha, four.y *= step.alpha, four.z *= step.alpha, four.w *= step.alpha;
          *reinterpret_cast<float4*>(orow + c) = four;
        }
        __syncwarp();  // both lanes of the row have read row_max[r] and row_sum[r]
        if (lane_index() % kRowLanes == 0) {
          row_sum[r] = row_sum[r] * step.alpha + sum;
          row_max[r] = step.max;
        }
      }
      __syncwarp();
      // O += P V (the accumulator through shared memory: its rows were just rescaled).
      FragA<T> p_frags[kMmaTile / 16];
#pragma unroll
      for (int kk = 0; kk < kMmaTile / 16; ++kk) wmma::load_matrix_sync(p_frags[kk], as_wmma(sp + r0 * L.ld_p + 16 * kk), L.ld_p);
#pragma unroll
      for (int j = 0; j < Dim / 16; ++j) {
        FragAcc out;
        wmma::load_matrix_sync(out, acc + r0 * L.ld_acc + 16 * j, L.ld_acc, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < kMmaTile / 16; ++kk) {
          FragB<T> values;
          wmma::load_matrix_sync(values, as_wmma(sv + 16 * kk * L.ld16 + 16 * j), L.ld16);
          wmma::mma_sync(out, p_frags[kk], values, out);
        }
        wmma::store_matrix_sync(acc + r0 * L.ld_acc + 16 * j, out, L.ld_acc, wmma::mem_row_major);
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows_q * n.e; i += blockDim.x) {
    const int64_t r = i / n.e, x = i % n.e;
    store_float(p.o.at(b, h, q0 + r, x), finish_output(acc[r * L.ld_acc + x], row_sum[r]));
  }
  for (int r = threadIdx.x; r < rows_q; r += blockDim.x) {
    *p.lse.at(b, h, q0 + r, 0) = finish_lse(row_max[r], row_sum[r]);
  }
}

// dS (16-bit, at ds with ld_p) of a strip: P (fp32, at prob with ld_s) times (dP - D), with the 16 x 16
// tiles of dP = left right^T computed here, one at a time through the warp's scratch tile. Rows of
// the strip are r0.. (their D: delta_of_row(r)), columns are the 64 of the inner tile.
template <typename T, int Dim, typename DeltaOf>
__device__ inline void score_gradients(T* ds, int64_t ld_p, const float* prob, int64_t ld_s, float* scratch,
                                       int64_t ld_scratch, const T* left, const T* right, int64_t ld16, int r0,
                                       DeltaOf delta_of) {
#pragma unroll
  for (int j = 0; j < kMmaTile / 16; ++j) {
    FragAcc dp;
    wmma::fill_fragment(dp, 0.0f);
    strip_times<T, Dim, FragBt<T>>(dp, left + r0 * ld16, ld16, right + 16 * j * ld16, ld16, 16);
    wmma::store_matrix_sync(scratch, dp, ld_scratch, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane_index(); i < 256; i += kLanes) {
      const int r = r0 + i / 16, c = 16 * j + i % 16;
      const float pr = prob[r * ld_s + c];
      store_float(ds + r * ld_p + c, pr == 0.0f ? 0.0f : score_gradient(pr, scratch[(i / 16) * ld_scratch + i % 16],
                                                                         delta_of(r, c)));
    }
    __syncwarp();
  }
}

// The dK/dV kernel's accumulation: for each of the warp's (strip, column half) items, acc += the
// strip's 16 x 64 rows of `left` (16-bit, ld_left) times the half's columns of `right` (64 rows,
// ld_right). Strips past the tile's rows_k are skipped.
template <typename T, int Half>
__device__ inline void accumulate_items(FragAcc (&acc)[kDkdvSlots][Half / 16], const T* left, int64_t ld_left,
                                        const T* right, int64_t ld_right, int64_t rows_k) {
#pragma unroll
  for (int slot = 0; slot < kDkdvSlots; ++slot) {
    const int item = warp_index() + slot * kDkdvWarps, r0 = kMmaStrip * (item / 2), c0 = Half * (item % 2);
    if (r0 >= rows_k) continue;
#pragma unroll
    for (int j = 0; j < Half / 16; ++j) {
      strip_times<T, kMmaTile, FragB<T>>(acc[slot][j], left + r0 * ld_left, ld_left, right + c0 + 16 * j, ld_right,
                                         16 * ld_right);
    }
  }
}

// Per key tile of kv head hk: every q head of its group, every query tile of that head's list.
// Eight warps: the 64 x 64 score products (S^T, dP^T) are dealt out as 16 tiles, the elementwise
// steps run over the whole block, and warp w accumulates dK and dV for the key rows of strip w / 2
// in the output columns of half w % 2. The phases meet at __syncthreads(). Two blocks per SM (at
// most 128 registers a thread) hide each other's loads: on the H200 this beat fetching the next Q
// and dO into registers at one block per SM (254 registers) by 13 % on the window's backward
// (docs/results.md section 6).
template <typename T, int Dim>
__global__ void __launch_bounds__(kDkdvThreads, 2) mma_dkdv_kernel(const DkdvParams<T> p) {
  constexpr MmaLayout L = mma_layout(Dim, Pass::backward);
  constexpr int kHalf = Dim / 2;  // output columns of a warp
  char* smem = reinterpret_cast<char*>(flash_device::dynamic_smem());
  uint64_t* bit_buffer = at<uint64_t*>(smem, 0);
  T *sk = at<T*>(smem, L.a), *sv = at<T*>(smem, L.b), *sq = at<T*>(smem, L.c), *sdo = at<T*>(smem, L.d);
  T* sp = at<T*>(smem, L.p);  // P^T, then dS^T
  float *prob = at<float*>(smem, L.s), *slse = at<float*>(smem, L.stat0), *sdelta = at<float*>(smem, L.stat1);
  float* scratch = at<float*>(smem, L.scratch) + warp_index() * kMmaStrip * L.ld_scratch;
  const FlashDims& n = p.dims;
  const int64_t tile = blockIdx.x, b = blockIdx.y / n.kv_heads, hk = blockIdx.y % n.kv_heads;
  const int64_t k0 = tile * kMmaTile, rows_k = tile_rows(n.seqlen_k, kMmaTile, tile);
  const int64_t group = n.heads / n.kv_heads;

  load_tile(sk, L.ld16, Dim, p.k, b, hk, k0, rows_k, n.d);
  load_tile(sv, L.ld16, Dim, p.v, b, hk, k0, rows_k, n.e);
  FragAcc dk[kDkdvSlots][kHalf / 16], dv[kDkdvSlots][kHalf / 16];
#pragma unroll
  for (int slot = 0; slot < kDkdvSlots; ++slot) {
#pragma unroll
    for (int j = 0; j < kHalf / 16; ++j) {
      wmma::fill_fragment(dk[slot][j], 0.0f);
      wmma::fill_fragment(dv[slot][j], 0.0f);
    }
  }
  for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    for (ListWalk walk = start_walk(p.lists, mask_of_head(p.lists, h), tile); walk.pos < walk.end;) {
      const VisitedTile visited = next_tile(p.lists, walk);
      const int64_t q0 = visited.tile * kMmaTile, rows_q = tile_rows(n.seqlen_q, kMmaTile, visited.tile);
      __syncthreads();  // the previous query tile is no longer read
      const uint64_t* bits = load_bits(bit_buffer, visited.bits, p.lists.bit_words);
      load_tile(sq, L.ld16, Dim, p.q, b, h, q0, rows_q, n.d);
      load_tile(sdo, L.ld16, Dim, p.d_o, b, h, q0, rows_q, n.e);
      load_stats(slse, sdelta, p.lse, p.delta, n, b, h, q0, rows_q);
      __syncthreads();
      // S^T = K Q^T, tile (key strip i, query tile j)
      for (int t = warp_index(); t < 16; t += kDkdvWarps) {
        const int i = t / 4, j = t % 4;
        if (kMmaStrip * i >= rows_k) continue;
        FragAcc scores;
        wmma::fill_fragment(scores, 0.0f);
        strip_times<T, Dim, FragBt<T>>(scores, sk + kMmaStrip * i * L.ld16, L.ld16, sq + 16 * j * L.ld16, L.ld16, 16);
        wmma::store_matrix_sync(prob + kMmaStrip * i * L.ld_s + 16 * j, scores, L.ld_s, wmma::mem_row_major);
      }
      __syncthreads();
      // P^T (fp32 for dS, 16-bit for the product): key r, query c
      for (int e = threadIdx.x; e < kMmaTile * kMmaTile; e += blockDim.x) {
        const int r = e / kMmaTile, c = e % kMmaTile;
        const float pr = (r < rows_k && c < rows_q && element_attends(bits, kMmaTile, r, c))
                             ? probability(n.scale * prob[r * L.ld_s + c], slse[c])
                             : 0.0f;
        prob[r * L.ld_s + c] = pr;
        store_float(sp + r * L.ld_p + c, pr);
      }
      __syncthreads();
      // dV += P^T dO: the warp's strip, its half of the columns
      accumulate_items<T, kHalf>(dv, sp, L.ld_p, sdo, L.ld16, rows_k);
      __syncthreads();  // every warp has read P^T; dS^T overwrites it
      // dS^T = P^T (dP^T - D), dP^T = V dO^T, tile by tile through the warp's scratch
      for (int t = warp_index(); t < 16; t += kDkdvWarps) {
        const int i = t / 4, j = t % 4;
        if (kMmaStrip * i >= rows_k) continue;
        FragAcc dp;
        wmma::fill_fragment(dp, 0.0f);
        strip_times<T, Dim, FragBt<T>>(dp, sv + kMmaStrip * i * L.ld16, L.ld16, sdo + 16 * j * L.ld16, L.ld16, 16);
        wmma::store_matrix_sync(scratch, dp, L.ld_scratch, wmma::mem_row_major);
        __syncwarp();
        for (int e = lane_index(); e < 256; e += kLanes) {
          const int r = kMmaStrip * i + e / 16, c = 16 * j + e % 16;
          const float pr = prob[r * L.ld_s + c];
          store_float(sp + r * L.ld_p + c,
                      pr == 0.0f ? 0.0f : score_gradient(pr, scratch[(e / 16) * L.ld_scratch + e % 16], sdelta[c]));
        }
        __syncwarp();
      }
      __syncthreads();
      // dK += dS^T Q (scaled at the store)
      accumulate_items<T, kHalf>(dk, sp, L.ld_p, sq, L.ld16, rows_k);
    }
  }
#pragma unroll
  for (int slot = 0; slot < kDkdvSlots; ++slot) {
    const int item = warp_index() + slot * kDkdvWarps, r0 = kMmaStrip * (item / 2), c0 = kHalf * (item % 2);
    if (r0 >= rows_k) continue;
    store_strip<T, kHalf>(dk[slot], scratch, L.ld_scratch, p.dk, b, hk, k0 + r0, rows_k - r0, c0, n.d, n.scale);
    store_strip<T, kHalf>(dv[slot], scratch, L.ld_scratch, p.dv, b, hk, k0 + r0, rows_k - r0, c0, n.e, 1.0f);
  }
}

template <typename T, int Dim>
__global__ void __launch_bounds__(kMmaThreads) mma_dq_kernel(const DqParams<T> p) {
  constexpr MmaLayout L = mma_layout(Dim, Pass::backward);
  char* smem = reinterpret_cast<char*>(flash_device::dynamic_smem());
  uint64_t* bit_buffer = at<uint64_t*>(smem, 0);
  T *sk = at<T*>(smem, L.a), *sv = at<T*>(smem, L.b), *sq = at<T*>(smem, L.c), *sdo = at<T*>(smem, L.d);
  T* sds = at<T*>(smem, L.p);
  float *prob = at<float*>(smem, L.s), *slse = at<float*>(smem, L.stat0), *sdelta = at<float*>(smem, L.stat1);
  float* scratch = at<float*>(smem, L.scratch) + warp_index() * kMmaStrip * L.ld_scratch;
  const FlashDims& n = p.dims;
  const auto [tile, b, h, hk, q0, rows_q] = query_block(n, kMmaTile);

  load_tile(sq, L.ld16, Dim, p.q, b, h, q0, rows_q, n.d);
  load_tile(sdo, L.ld16, Dim, p.d_o, b, h, q0, rows_q, n.e);
  load_stats(slse, sdelta, p.lse, p.delta, n, b, h, q0, rows_q);
  FragAcc dq[kSlots][Dim / 16];
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
#pragma unroll
    for (int j = 0; j < Dim / 16; ++j) wmma::fill_fragment(dq[slot][j], 0.0f);
  }
  for (KeyStream<T, Dim> keys(p, b, h, hk, tile); keys.more;) {
    const StreamedTile current = keys.advance(p, bit_buffer, sk, sv, L.ld16);
    const int64_t rows_k = current.rows;
    const uint64_t* bits = current.bits;
#pragma unroll
    for (int slot = 0; slot < kSlots; ++slot) {
      const int r0 = kMmaStrip * (warp_index() + slot * kWarps);  // the strip's first query row
      if (r0 >= rows_q) continue;
      // S = Q K^T, then P = e^{scale S - LSE} (fp32)
#pragma unroll
      for (int j = 0; j < kMmaTile / 16; ++j) {
        FragAcc scores;
        wmma::fill_fragment(scores, 0.0f);
        strip_times<T, Dim, FragBt<T>>(scores, sq + r0 * L.ld16, L.ld16, sk + 16 * j * L.ld16, L.ld16, 16);
        wmma::store_matrix_sync(prob + r0 * L.ld_s + 16 * j, scores, L.ld_s, wmma::mem_row_major);
      }
      __syncwarp();
      for (int i = lane_index(); i < kMmaStrip * kMmaTile; i += kLanes) {
        const int r = r0 + i / kMmaTile, c = i % kMmaTile;  // query r, key c
        prob[r * L.ld_s + c] = (r < rows_q && c < rows_k && element_attends(bits, kMmaTile, r, c))
                                   ? probability(n.scale * prob[r * L.ld_s + c], slse[r])
                                   : 0.0f;
      }
      __syncwarp();
      // dS = P (dP - D), dP = dO V^T
      score_gradients<T, Dim>(sds, L.ld_p, prob, L.ld_s, scratch, L.ld_scratch, sdo, sv, L.ld16, r0,
                              [&](int r, int) { return sdelta[r]; });
      // dQ += dS K (scaled at the store)
#pragma unroll
      for (int j = 0; j < Dim / 16; ++j) {
        strip_times<T, kMmaTile, FragB<T>>(dq[slot][j], sds + r0 * L.ld_p, L.ld_p, sk + 16 * j, L.ld16, 16 * L.ld16);
      }
      __syncwarp();
    }
  }
#pragma unroll
  for (int slot = 0; slot < kSlots; ++slot) {
    const int r0 = kMmaStrip * (warp_index() + slot * kWarps);
    if (r0 >= rows_q) continue;
    store_strip<T, Dim>(dq[slot], scratch, L.ld_scratch, p.dq, b, h, q0 + r0, rows_q - r0, 0, n.d, n.scale);
  }
}

}  // namespace spattn::cuda::detail::mma_device
