// The arithmetic of the small-cache schedule on tiles already in fast memory (small_cache.hpp,
// tiled_matmul.hpp): the tile product of tiled_matmul and the elementwise steps its hooks fuse in.
// These only compute, on contiguous fast buffers, with no allocation; the schedules move the data.
//
// Each function exists per instruction set (portable, AVX2+FMA, AVX-512), compiled in the flash
// kernels' translation units (flash_kernels_isa.hpp) and chosen with them at run time
// (flash_kernels::kernel_isa(); SPATTN_KERNELS=portable|avx2|avx512|avx512_bf16 forces one, and
// avx512_bf16 takes the avx512 set here). Within one set every result is a fixed function of the
// tile shapes (register blocks, partial sums and their reduction order depend on nothing else),
// so bit-identical for any thread count and across runs.
#pragma once

#include <cstdint>

namespace spattn::schedules::small_cache_kernels {

// C (rows, cols; ldc) += alpha * A (rows, depth; lda) * op(B), all row-major in fast memory.
// op(B) is B (depth, cols; ldb) or, when b_transposed, the buffer holds B^T (cols, depth; ldb).
// Why two layouts: a product whose tile is narrower than a vector (S = Q K^T with tiles a few
// columns wide) is computed as dot products along the depth, which wants both operands
// contiguous along it; a wide one is computed as outer products, vectorized along the columns.
struct Product {
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  bool b_transposed = false;
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t rows = 0, depth = 0, cols = 0;
  float alpha = 1.0f;
};
void multiply_add(const Product& product);

// Whether tiled_matmul should hold a B chunk `cols` wide transposed for the kernels in use: when
// it is narrower than a vector.
bool prefers_transposed_b(int64_t cols);

// x[r][c] = exp(x[r][c] - shift[r]) for the rows x cols block at leading dimension ld; a row
// whose shift is -inf gets 0 (it attends nothing). exp is the flash kernels' polynomial (within
// 2 ulp; exactly 0 below -87).
void exp_shifted_rows(float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift);

// The online softmax statistics over one tile of scores (rows, cols; ld): per row,
// m' = max(m, max_c s), l' = l exp(m - m') + sum_c exp(s - m'). Before a row's first tile
// m = -inf and l = 0.
void update_row_statistics(const float* s, int64_t rows, int64_t cols, int64_t ld, float* row_max,
                           float* row_sum);

// The density-adaptive schedule's per-entry steps (sparse_small_cache_walk.hpp): a . b over n
// floats (kLanes interleaved partial sums reduced by a fixed tree, then the tail in order), and
// y += alpha x.
float dot(const float* a, const float* b, int64_t n);
void axpy(float alpha, const float* x, float* y, int64_t n);

}  // namespace spattn::schedules::small_cache_kernels
