// The tensor-core flash kernels for fp16 / bf16 inputs: forward (O, LSE), dK/dV over key tiles and
// dQ over query tiles, on the same tile lists, bit sets and per-element rules as the fp32 kernels
// (flash_kernels.cuh), with every product on 16 x 16 x 16 matrix tiles (wmma: fp16 / bf16 operands,
// fp32 accumulation). No atomics: each output element is summed by one warp in a fixed order.
//
// Forward and dQ: a block of four warps holds a 64-row outer tile; warp w owns rows [16 w, 16 w + 16)
// of it (its strip): the strip's scores, softmax, probabilities and accumulators are the warp's
// alone, so the warps meet only at __syncthreads() around the loads of the streamed tiles, whose
// next one is fetched into registers during the products. dK/dV: eight warps, two per strip (see
// there). Operands go through
// shared memory as 16-bit values (P and dS rounded once, as FlashAttention does); row statistics,
// P for dS, and the forward's O accumulator stay fp32 (the O accumulator is rescaled per row by the
// online softmax, which a wmma fragment's opaque layout does not allow in registers). The dK, dV and
// dQ accumulators need no rescaling and stay in registers for the whole block.
//
// Like flash_kernels.cuh, the bodies compile for the host (tests/cuda_emulation): one thread per
// block is then one warp of one lane that walks every strip, with emulated_wmma.hpp for wmma.
#pragma once

#include "cuda/flash_kernels.cuh"
#include "cuda/mma_kernels.hpp"

#ifndef SPATTN_FLASH_EMULATION
#include <mma.h>
#else
#include "emulated_wmma.hpp"
#endif

namespace spattn::cuda::detail::mma_device {

using namespace spattn::tile_math;
using flash_device::load_bits;
using flash_device::query_block;

#ifndef SPATTN_FLASH_EMULATION
namespace wmma = nvcuda::wmma;
constexpr int kWarps = kMmaThreads / 32;  // one strip per warp
constexpr int kDkdvWarps = kDkdvThreads / 32;  // one (strip, column half) per warp
constexpr int kLanes = 32;
template <typename T>
struct WmmaType;
template <>
struct WmmaType<half_t> {
  using type = __half;
};
template <>
struct WmmaType<bfloat16_t> {
  using type = __nv_bfloat16;
};
#else
namespace wmma = spattn_emulation::wmma;
constexpr int kWarps = 1;  // one warp walks all four strips
constexpr int kDkdvWarps = 1;
constexpr int kLanes = 1;
template <typename T>
struct WmmaType {
  using type = T;
};
inline void __syncwarp() {}
#endif

// The strips a warp walks: strip = warp_index() + slot * kWarps for slot < kSlots (one on the GPU,
// so that register accumulators indexed by slot stay registers).
constexpr int kSlots = kMmaTile / kMmaStrip / kWarps;
// The dK/dV kernel's (strip, column half) items of a warp: item = warp_index() + slot * kDkdvWarps.
constexpr int kDkdvSlots = 2 * kMmaTile / kMmaStrip / kDkdvWarps;

// The forward's softmax: kRowLanes lanes per row (two on the GPU: one shuffle per reduction),
// each over kRowCols keys; a warp's pass covers kRowStep rows at a time.
constexpr int kRowLanes = kLanes == 32 ? 2 : 1;
constexpr int kRowCols = kMmaTile / kRowLanes;
constexpr int kRowStep = kLanes / kRowLanes;

__device__ __forceinline__ float pair_max(float x) {
#ifndef SPATTN_FLASH_EMULATION
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
#else
  return x;
#endif
}
__device__ __forceinline__ float pair_sum(float x) {
#ifndef SPATTN_FLASH_EMULATION
  return x + __shfl_xor_sync(0xffffffffu, x, 1);
#else
  return x;
#endif
}

__device__ __forceinline__ int warp_index() { return static_cast<int>(threadIdx.x) / 32; }
__device__ __forceinline__ int lane_index() { return static_cast<int>(threadIdx.x) % 32; }

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, typename WmmaType<T>::type, wmma::row_major>;
template <typename T>
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, typename WmmaType<T>::type, wmma::row_major>;
template <typename T>
using FragBt = wmma::fragment<wmma::matrix_b, 16, 16, 16, typename WmmaType<T>::type, wmma::col_major>;
using FragAcc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <typename T>
__device__ __forceinline__ const typename WmmaType<T>::type* as_wmma(const T* p) {
  return reinterpret_cast<const typename WmmaType<T>::type*>(p);
}

template <typename Pointer>
__device__ __forceinline__ Pointer at(char* smem, int64_t offset) {
  return reinterpret_cast<Pointer>(smem + offset);
}

// Whether rows of src move as 16-byte vectors into a tile of `dim` columns: contiguous rows of
// exactly dim elements, every row start 16-byte aligned.
template <typename T>
__device__ inline bool vector_rows(const Strided<const T>& src, int64_t cols, int dim) {
  return src.stride[3] == 1 && cols == dim && src.stride[2] % 8 == 0 && src.stride[1] % 8 == 0 &&
         src.stride[0] % 8 == 0 && reinterpret_cast<uintptr_t>(src.data) % 16 == 0;
}

// dst (kMmaTile rows, dim columns, row stride ld) = rows [s0, s0 + rows) and columns [0, cols) of
// head (b, h), zero elsewhere (tail rows and the padding columns contribute nothing to products).
// Eight elements per 16-byte access when vector_rows allows.
template <typename T>
__device__ inline void load_tile(T* dst, int64_t ld, int dim, const Strided<const T>& src, int64_t b, int64_t h,
                                 int64_t s0, int64_t rows, int64_t cols) {
  if (vector_rows(src, cols, dim)) {
    const int per_row = dim / 8;
    for (int i = threadIdx.x; i < kMmaTile * per_row; i += blockDim.x) {
      const int r = i / per_row, x = 8 * (i % per_row);
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r < rows) value = *reinterpret_cast<const uint4*>(src.at(b, h, s0 + r, x));
      *reinterpret_cast<uint4*>(dst + r * ld + x) = value;
    }
    return;
  }
  for (int i = threadIdx.x; i < kMmaTile * dim; i += blockDim.x) {
    const int r = i / dim, x = i % dim;
    dst[r * ld + x] = (r < rows && x < cols) ? *src.at(b, h, s0 + r, x) : T{};
  }
}

// A streamed tile loaded in two steps: fetch() issues the global loads into registers, store()
// writes them to shared memory, so that the loads of the next tile fly while the block computes
// on the current one. Rows that are not 16-byte vectors are loaded by store() instead (from the
// same tensor, passed again).
template <typename T, int Dim>
struct TilePrefetch {
  static constexpr int kThreads = kWarps * kLanes;  // of the forward and dQ kernels
  static constexpr int kVectors = kMmaTile * Dim / 8 / kThreads;
  uint4 v[kVectors];
  int64_t b = 0, h = 0, s0 = 0, rows = 0, cols = 0;
  bool vectors = false;

  __device__ void fetch(const Strided<const T>& from, int64_t b_, int64_t h_, int64_t s0_, int64_t rows_,
                        int64_t cols_) {
    b = b_, h = h_, s0 = s0_, rows = rows_, cols = cols_;
    vectors = vector_rows(from, cols, Dim);
    if (!vectors) return;
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int index = static_cast<int>(threadIdx.x) + i * kThreads, r = index / (Dim / 8);
      v[i] = r < rows ? *reinterpret_cast<const uint4*>(from.at(b, h, s0 + r, 8 * (index % (Dim / 8))))
                      : make_uint4(0, 0, 0, 0);
    }
  }
  __device__ void store(T* dst, int64_t ld, const Strided<const T>& from) const {
    if (!vectors) return load_tile(dst, ld, Dim, from, b, h, s0, rows, cols);
#pragma unroll
    for (int i = 0; i < kVectors; ++i) {
      const int index = static_cast<int>(threadIdx.x) + i * kThreads;
      *reinterpret_cast<uint4*>(dst + (index / (Dim / 8)) * ld + 8 * (index % (Dim / 8))) = v[i];
    }
  }
};

// The key tiles of a forward or dQ block's list, streamed: the next tile's K and V are fetched into
// registers while the block computes on the current one. `p` is the kernel's parameters (K, V, the
// lists, the dims), passed to each call.
struct StreamedTile {
  int64_t rows = 0;                // key rows of the tile (fewer in the last one)
  const uint64_t* bits = nullptr;  // its bit set in shared memory; nullptr: a full tile
};
template <typename T, int Dim>
struct KeyStream {
  int64_t b = 0, hk = 0;
  ListWalk walk;
  TilePrefetch<T, Dim> next_k, next_v;
  VisitedTile next;
  bool more = false;  // a fetched tile waits for advance()

  template <typename Params>
  __device__ KeyStream(const Params& p, int64_t b_, int64_t h, int64_t hk_, int64_t tile)
      : b(b_), hk(hk_), walk(start_walk(p.lists, mask_of_head(p.lists, h), tile)) {
    more = fetch(p);
  }
  template <typename Params>
  __device__ bool fetch(const Params& p) {
    if (walk.pos >= walk.end) return false;
    next = next_tile(p.lists, walk);
    const int64_t rows = tile_rows(p.dims.seqlen_k, kMmaTile, next.tile);
    next_k.fetch(p.k, b, hk, next.tile * kMmaTile, rows, p.dims.d);
    next_v.fetch(p.v, b, hk, next.tile * kMmaTile, rows, p.dims.e);
    return true;
  }
  // Makes the fetched tile current: waits until the previous one is no longer read, writes its K,
  // V and bit set to shared memory, and fetches the one after (in flight during the products).
  template <typename Params>
  __device__ StreamedTile advance(const Params& p, uint64_t* bit_buffer, T* sk, T* sv, int64_t ld16) {
    const VisitedTile visited = next;
    StreamedTile current;
    current.rows = tile_rows(p.dims.seqlen_k, kMmaTile, visited.tile);
    __syncthreads();  // the previous key tile and bit set are no longer read
    current.bits = load_bits(bit_buffer, visited.bits, p.lists.bit_words);
    next_k.store(sk, ld16, p.k);
    next_v.store(sv, ld16, p.v);
    __syncthreads();
    more = fetch(p);
    return current;
  }
};

// LSE and D of query rows [q0, q0 + rows) (zero beyond: never read for a pair outside the tile).
__device__ inline void load_stats(float* lse_out, float* delta_out, const Strided<const float>& lse, const float* delta,
                                  const FlashDims& n, int64_t b, int64_t h, int64_t q0, int64_t rows) {
  for (int r = threadIdx.x; r < kMmaTile; r += blockDim.x) {
    lse_out[r] = r < rows ? *lse.at(b, h, q0 + r, 0) : 0.0f;
    delta_out[r] = r < rows ? delta[(b * n.heads + h) * n.seqlen_q + q0 + r] : 0.0f;
  }
}

// out (16 x 16 tile at out, ld) = rows [r0, r0 + 16) of a (row-major, lda) times the 16 x 16 tile
// of b at column tile j: b is (k, n) row-major (FragB, ldb) or its rows are the n (FragBt: b^T).
template <typename T, int Dim, typename FragRight>
__device__ inline void strip_times(FragAcc& acc, const T* a, int64_t lda, const T* b_tile, int64_t ldb,
                                   int64_t b_step) {
#pragma unroll
  for (int kk = 0; kk < Dim / 16; ++kk) {
    FragA<T> left;
    FragRight right;
    wmma::load_matrix_sync(left, as_wmma(a + 16 * kk), lda);
    wmma::load_matrix_sync(right, as_wmma(b_tile + kk * b_step), ldb);
    wmma::mma_sync(acc, left, right, acc);
  }
}

// A warp's accumulators (16 rows x Cols columns from column col0) written to rows [r0, r0 + 16) of
// head (b, h), times factor, through the warp's 16 x 16 scratch tile: rows below `rows` and columns
// below `cols` only.
template <typename T, int Cols>
__device__ inline void store_strip(const FragAcc (&acc)[Cols / 16], float* scratch, int64_t ld_scratch,
                                   const Strided<T>& dst, int64_t b, int64_t h, int64_t r0, int64_t rows,
                                   int64_t col0, int64_t cols, float factor) {
#pragma unroll
  for (int j = 0; j < Cols / 16; ++j) {
    wmma::store_matrix_sync(scratch, acc[j], ld_scratch, wmma::mem_row_major);
    __syncwarp();
    for (int i = lane_index(); i < 256; i += kLanes) {
      const int r = i / 16;
      const int64_t x = col0 + 16 * j + i % 16;
      if (r < rows && x < cols) store_float(dst.at(b, h, r0 + r, x), scratch[r * ld_scratch + i % 16] * factor);
    }
    __syncwarp();
  }
}

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
