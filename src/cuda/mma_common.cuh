// What the tensor-core flash kernels (mma_kernels.cuh) share: the wmma types (or their host
// emulation), warp helpers, tile loads and prefetches, and the strip products. The kernels are the
// forward (O, LSE), dK/dV over key tiles and dQ over query tiles, on the same tile lists, bit sets and per-element rules as the fp32 kernels
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
static_assert(kSlots >= 1 && kSlots * kWarps * kMmaStrip == kMmaTile, "every strip has one warp slot");
static_assert(kDkdvSlots >= 1 && kDkdvSlots * kDkdvWarps * kMmaStrip == 2 * kMmaTile,
              "every (strip, column half) has one warp slot");

// The forward's softmax: kRowLanes lanes per row (two on the GPU: one shuffle per reduction),
// each over kRowCols keys; a warp's pass covers kRowStep rows at a time.
constexpr int kRowLanes = kLanes == 32 ? 2 : 1;
constexpr int kRowCols = kMmaTile / kRowLanes;
constexpr int kRowStep = kLanes / kRowLanes;
static_assert(kMmaTile % kRowLanes == 0 && kLanes % kRowLanes == 0, "a row's keys split evenly over its lanes");

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
  static_assert(kVectors >= 1 && kVectors * 8 * kThreads == kMmaTile * Dim,
                "a tile is whole 16-byte vectors, as many for every thread");
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

}  // namespace spattn::cuda::detail::mma_device
