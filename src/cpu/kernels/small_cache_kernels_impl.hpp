// The small-cache kernels (small_cache_kernels.hpp), written once over a configuration: a lane type
// of the flash kernels (flash_kernels_lanes.hpp) and the register blocks. Included, after
// flash_kernels_impl.hpp, by the flash kernels' translation unit of each instruction set, which
// compiles it for its own target inside its own namespace (SPATTN_KERNEL_NAMESPACE).
//
// Order of operations (a fixed function of the shapes, whatever the thread count):
//   outer-product form (B row-major): each output sums its depth in order, in a register, and is
//     added to C once per call;
//   dot-product form (B^T): each output sums its depth in kLanes interleaved partial sums
//     (p mod kLanes), reduced by a fixed pairwise tree, then the depth's tail in order;
//   elementwise steps: lane-wise, the same operations per element whatever the lane count.
#pragma once

#include "cpu/kernels/flash_kernels_lanes.hpp"
#include "cpu/kernels/small_cache_kernels.hpp"
#include "cpu/kernels/small_cache_kernels_isa.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE::small_cache {

using spattn::schedules::small_cache_kernels::Product;

// Lanes: the lane type. NnRows x NnVecs: the outer-product block (rows x vectors of C held in
// registers). NtRows x NtCols: the dot-product block (outputs, each a vector of partial sums).
template <typename Lanes, int NnRows, int NnVecs, int NtRows, int NtCols>
struct Config {
  using L = Lanes;
  static constexpr int kNnRows = NnRows;
  static constexpr int kNnVecs = NnVecs;
  static constexpr int kNtRows = NtRows;
  static constexpr int kNtCols = NtCols;
};

// ---- the product, outer-product form ---------------------------------------------------------

// C rows [r0, r0 + R) x columns [x0, x0 + X kLanes) += alpha * A B.
template <typename L, int R, int X>
SPATTN_KERNEL_INLINE void nn_block(const Product& t, int64_t r0, int64_t x0) {
  using V = typename L::V;
  constexpr int64_t W = L::kLanes;
  // Locals, so that no store to C makes the compiler reload the product's fields.
  const int64_t lda = t.lda, ldb = t.ldb, ldc = t.ldc, depth = t.depth;
  const float alpha = t.alpha;
  const float* SPATTN_RESTRICT a = t.a + r0 * lda;
  const float* SPATTN_RESTRICT b = t.b + x0;
  float* SPATTN_RESTRICT c = t.c + r0 * ldc + x0;
  V acc[R * X];  // acc[r X + v]
  SPATTN_UNROLL for (int j = 0; j < R * X; ++j) acc[j] = splat<L>(0.0f);
  for (int64_t p = 0; p < depth; ++p) {
    V bv[X];
    SPATTN_UNROLL for (int v = 0; v < X; ++v) {
      bv[v] = load<L>(b + p * ldb + v * W);
      if constexpr (R > 1) keep_in_register(bv[v]);
    }
    SPATTN_UNROLL for (int j = 0; j < R * X; ++j) acc[j] += a[(j / X) * lda + p] * bv[j % X];
  }
  SPATTN_UNROLL for (int j = 0; j < R * X; ++j) {
    float* out = c + (j / X) * ldc + (j % X) * W;
    store<L>(out, load<L>(out) + acc[j] * alpha);
  }
}

// Columns [x0, x0 + X kLanes) of every row, R rows at a time.
template <typename Cfg, typename L, int X>
SPATTN_KERNEL_INLINE void nn_columns(const Product& t, int64_t x0) {
  constexpr int R = Cfg::kNnRows;
  int64_t r0 = 0;
  for (; r0 + R <= t.rows; r0 += R) nn_block<L, R, X>(t, r0, x0);
  for (; r0 < t.rows; ++r0) nn_block<L, 1, X>(t, r0, x0);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void nn_product(const Product& t) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  constexpr int X = Cfg::kNnVecs;
  int64_t x0 = 0;
  for (; x0 + X * W <= t.cols; x0 += X * W) nn_columns<Cfg, L, X>(t, x0);
  for (; x0 + W <= t.cols; x0 += W) nn_columns<Cfg, L, 1>(t, x0);
  for (; x0 < t.cols; ++x0) nn_columns<Cfg, Lanes1, 1>(t, x0);  // cols not a multiple of lanes
}

// ---- the product, dot-product form -----------------------------------------------------------

template <typename L>
SPATTN_KERNEL_INLINE float reduce_lanes(typename L::V v) {
  float lanes[L::kLanes];
  std::memcpy(lanes, &v, sizeof v);
  for (int width = L::kLanes / 2; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// Outputs (r0 + i, c0 + j), i < R, j < C: C += alpha * A[row] . B^T[col].
template <typename L, int R, int C>
SPATTN_KERNEL_INLINE void nt_block(const Product& t, int64_t r0, int64_t c0) {
  using V = typename L::V;
  constexpr int64_t W = L::kLanes;
  const int64_t lda = t.lda, ldb = t.ldb, ldc = t.ldc, depth = t.depth;
  const float alpha = t.alpha;
  const float* SPATTN_RESTRICT a = t.a + r0 * lda;
  const float* SPATTN_RESTRICT bt = t.b + c0 * ldb;
  float* SPATTN_RESTRICT c = t.c + r0 * ldc + c0;
  V acc[R * C];  // acc[i C + j]
  SPATTN_UNROLL for (int j = 0; j < R * C; ++j) acc[j] = splat<L>(0.0f);
  int64_t p = 0;
  for (; p + W <= depth; p += W) {
    V bv[C];
    SPATTN_UNROLL for (int j = 0; j < C; ++j) {
      bv[j] = load<L>(bt + j * ldb + p);
      if constexpr (R > 1) keep_in_register(bv[j]);
    }
    SPATTN_UNROLL for (int j = 0; j < R * C; ++j) {
      acc[j] += load<L>(a + (j / C) * lda + p) * bv[j % C];
    }
  }
  float sums[R * C];
  SPATTN_UNROLL for (int j = 0; j < R * C; ++j) sums[j] = reduce_lanes<L>(acc[j]);
  for (int j = 0; j < R * C; ++j) {
    const int64_t i = j / C, col = j % C;
    float sum = sums[j];
    for (int64_t q = p; q < depth; ++q) sum += a[i * lda + q] * bt[col * ldb + q];
    c[i * ldc + col] += alpha * sum;
  }
}

template <typename Cfg, int C>
SPATTN_KERNEL_INLINE void nt_columns(const Product& t, int64_t c0) {
  using L = typename Cfg::L;
  constexpr int R = Cfg::kNtRows;
  int64_t r0 = 0;
  for (; r0 + R <= t.rows; r0 += R) nt_block<L, R, C>(t, r0, c0);
  for (; r0 < t.rows; ++r0) nt_block<L, 1, C>(t, r0, c0);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void nt_product(const Product& t) {
  constexpr int C = Cfg::kNtCols;
  int64_t c0 = 0;
  for (; c0 + C <= t.cols; c0 += C) nt_columns<Cfg, C>(t, c0);
  for (; c0 < t.cols; ++c0) nt_columns<Cfg, 1>(t, c0);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void multiply_add(const Product& t) {
  if (t.b_transposed) {
    nt_product<Cfg>(t);
  } else {
    nn_product<Cfg>(t);
  }
}

// ---- elementwise steps, kLanes rows at a time ------------------------------------------------
// The tiles are often only a few columns wide (S tiles of 1 to 5 columns), so the steps run down
// the rows, each column's kLanes entries gathered at stride ld; the row tail takes Lanes1 with the
// same operations. Their exp reads its constants from one line (kExpConstantsLine,
// exp_constants.hpp): at the smallest M these steps run beside tiles of a few dozen lines.

template <typename L>
SPATTN_KERNEL_INLINE typename L::V gather(const float* p, int64_t stride) {
  float lanes[L::kLanes];
  for (int l = 0; l < L::kLanes; ++l) lanes[l] = p[l * stride];
  return load<L>(lanes);
}
template <typename L>
SPATTN_KERNEL_INLINE void scatter(float* p, int64_t stride, typename L::V v) {
  float lanes[L::kLanes];
  store<L>(lanes, v);
  for (int l = 0; l < L::kLanes; ++l) p[l * stride] = lanes[l];
}

template <typename L>
SPATTN_KERNEL_INLINE void exp_rows_block(float* x, int64_t cols, int64_t ld, const float* shift) {
  using V = typename L::V;
  const V sh = load<L>(shift);
  const V zero = splat<L>(0.0f);
  const auto empty = sh == splat<L>(kExpConstantsLine.neg_inf);
  for (int64_t c = 0; c < cols; ++c) {
    const V p = exp_lanes<L>(gather<L>(x + c, ld) - sh, kExpConstantsLine);
    scatter<L>(x + c, ld, empty ? zero : p);
  }
}

template <typename L>
SPATTN_KERNEL_INLINE void row_statistics_block(const float* s, int64_t cols, int64_t ld,
                                               float* row_max, float* row_sum) {
  using V = typename L::V;
  const V m_old = load<L>(row_max);
  V m = m_old;
  for (int64_t c = 0; c < cols; ++c) m = max_lanes<L>(m, gather<L>(s + c, ld));
  // A row still at -inf (no columns yet) keeps l = 0: exp(-inf - 0) = 0.
  const V m_use = m == splat<L>(kExpConstantsLine.neg_inf) ? splat<L>(0.0f) : m;
  V sum = load<L>(row_sum) * exp_lanes<L>(m_old - m_use, kExpConstantsLine);
  for (int64_t c = 0; c < cols; ++c) sum += exp_lanes<L>(gather<L>(s + c, ld) - m_use, kExpConstantsLine);
  store<L>(row_max, m);
  store<L>(row_sum, sum);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void exp_shifted_rows(float* x, int64_t rows, int64_t cols, int64_t ld,
                                           const float* shift) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  int64_t r = 0;
  for (; r + W <= rows; r += W) exp_rows_block<L>(x + r * ld, cols, ld, shift + r);
  for (; r < rows; ++r) exp_rows_block<Lanes1>(x + r * ld, cols, ld, shift + r);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void update_row_statistics(const float* s, int64_t rows, int64_t cols,
                                                int64_t ld, float* row_max, float* row_sum) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  int64_t r = 0;
  for (; r + W <= rows; r += W) {
    row_statistics_block<L>(s + r * ld, cols, ld, row_max + r, row_sum + r);
  }
  for (; r < rows; ++r) {
    row_statistics_block<Lanes1>(s + r * ld, cols, ld, row_max + r, row_sum + r);
  }
}

// ---- the sparse schedule's per-entry steps -------------------------------------------------

template <typename Cfg>
SPATTN_KERNEL_INLINE float dot(const float* SPATTN_RESTRICT a, const float* SPATTN_RESTRICT b,
                               int64_t n) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  typename L::V acc = splat<L>(0.0f);
  int64_t i = 0;
  for (; i + W <= n; i += W) acc += load<L>(a + i) * load<L>(b + i);
  float sum = reduce_lanes<L>(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void axpy(float alpha, const float* SPATTN_RESTRICT x,
                               float* SPATTN_RESTRICT y, int64_t n) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) store<L>(y + i, load<L>(y + i) + alpha * load<L>(x + i));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// ---- the entry points of one configuration ------------------------------------------------

// Out-of-line functions (the templates above are always inlined) for the dispatch table.
template <typename Cfg>
struct Entries {
  static void multiply_add(const Product& t) { small_cache::multiply_add<Cfg>(t); }
  static void exp_shifted_rows(float* x, int64_t rows, int64_t cols, int64_t ld,
                               const float* shift) {
    small_cache::exp_shifted_rows<Cfg>(x, rows, cols, ld, shift);
  }
  static void update_row_statistics(const float* s, int64_t rows, int64_t cols, int64_t ld,
                                    float* row_max, float* row_sum) {
    small_cache::update_row_statistics<Cfg>(s, rows, cols, ld, row_max, row_sum);
  }
  static float dot(const float* a, const float* b, int64_t n) {
    return small_cache::dot<Cfg>(a, b, n);
  }
  static void axpy(float alpha, const float* x, float* y, int64_t n) {
    small_cache::axpy<Cfg>(alpha, x, y, n);
  }
};

template <typename Cfg>
constexpr small_cache_kernels::isa::Table table() {
  using E = Entries<Cfg>;
  return {Cfg::L::kLanes, E::multiply_add, E::exp_shifted_rows, E::update_row_statistics, E::dot,
          E::axpy};
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE::small_cache
