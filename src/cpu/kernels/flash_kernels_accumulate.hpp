// The flash kernels' accumulating products (flash_kernels.hpp): acc += w^T b for the output O (with
// the forward's rescaling), dQ, dK and dV, in two orders of the same sums, over a configuration of
// flash_kernels_products.hpp. Included through flash_kernels_impl.hpp by one translation unit per
// instruction set (flash_kernels_lanes.hpp says why).
#pragma once

#include "cpu/kernels/flash_kernels_products.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

// acc (rows_o, cols) = acc alpha + w^T b, for w (rows_i, rows_o at ldw) and b (rows_i, cols), built
// like a GEMM microkernel: a block of R outer rows by X vectors of acc stays in registers while
// every inner row is added to it, so each accumulator is loaded and stored once per tile, and each
// inner row costs X loads of b and R broadcasts of w for R X multiply-adds.
// Every element still computes acc alpha (when alpha != nullptr), then adds w[i][o] b[i][x] for
// i = 0, 1, ... in order: the result does not depend on R and X.
// With `ranges` (attended_ranges; only without alpha) a block of kMaxBlockRows inner rows is
// skipped for the register blocks none of whose outer rows it attends (w is 0 there; adding those
// zeros to the rows the block does not attend within a register block leaves them as they are).

// Whether a register block of outer rows [o0, o1) adds the block of inner rows that starts at i0:
// not when `ranges` says none of its outer rows attends that block.
SPATTN_KERNEL_INLINE bool block_attends(const RowRange* ranges, int64_t i0, int64_t o0, int64_t o1) {
  if (ranges == nullptr) return true;
  const RowRange range = ranges[i0 / kMaxBlockRows];
  return range.begin < range.end && range.begin < o1 && o0 < range.end;
}

// The outer rows a block of inner rows from i0 updates: all of them, or (with `ranges`, one per
// block of kMaxBlockRows inner rows, attended_ranges) its attended ones. False when it attends
// none. (A reference out, as chunks_of_block: products.hpp says why.)
SPATTN_KERNEL_INLINE bool outer_rows_of_block(const RowRange* ranges, int64_t i0, int64_t rows_o, RowRange& outer) {
  outer = RowRange{0, rows_o};
  if (ranges == nullptr) return true;
  outer = ranges[i0 / kMaxBlockRows];
  return outer.begin < outer.end;
}

// acc rows [o0, o0 + R), columns [x0, x0 + X kLanes).
template <typename Cfg, int R, int X>
SPATTN_KERNEL_INLINE void accumulate_block(float* SPATTN_RESTRICT acc, int64_t cols, int64_t o0, int64_t x0,
                                           const float* SPATTN_RESTRICT w, int64_t ldw, int64_t rows_i,
                                           const float* SPATTN_RESTRICT b,
                                           const float* SPATTN_RESTRICT alpha, const RowRange* ranges) {
  using L = typename Cfg::L;
  using V = typename L::V;
  constexpr int64_t W = L::kLanes;
  V t[R * X];  // t[r X + v]: row o0 + r, vector v
  SPATTN_UNROLL for (int j = 0; j < R * X; ++j) {
    t[j] = load<L>(acc + (o0 + j / X) * cols + x0 + (j % X) * W);
  }
  if (alpha != nullptr) {  // rounded before the first add (keep_in_register: no fused multiply-add)
    SPATTN_UNROLL for (int j = 0; j < R * X; ++j) {
      t[j] = t[j] * alpha[o0 + j / X];
      keep_in_register(t[j]);
    }
  }
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    if (!block_attends(ranges, i0, o0, o0 + R)) continue;
    const int64_t i1 = rows_i - i0 < kMaxBlockRows ? rows_i : i0 + kMaxBlockRows;
    for (int64_t i = i0; i < i1; ++i) {
      V inner[X];
      SPATTN_UNROLL for (int v = 0; v < X; ++v) {
        inner[v] = load<L>(b + i * cols + x0 + v * W);
        if constexpr (R > 1) keep_in_register(inner[v]);
      }
      const float* w_row = w + i * ldw + o0;
      SPATTN_UNROLL for (int j = 0; j < R * X; ++j) t[j] += w_row[j / X] * inner[j % X];
    }
  }
  SPATTN_UNROLL for (int j = 0; j < R * X; ++j) {
    store<L>(acc + (o0 + j / X) * cols + x0 + (j % X) * W, t[j]);
  }
}

// Columns [x0, x0 + X kLanes) of every outer row, R rows at a time, then the rows left in one
// smaller block.
template <typename Cfg, int R, int X>
SPATTN_KERNEL_INLINE void accumulate_columns(float* acc, int64_t rows_o, int64_t cols, int64_t x0,
                                             const float* w, int64_t ldw, int64_t rows_i, const float* b,
                                             const float* alpha, const RowRange* ranges) {
  static_assert(R >= 1 && R <= 8, "the rows left after the blocks of R are dispatched up to 7");
  int64_t o0 = 0;
  for (; o0 + R <= rows_o; o0 += R) {
    accumulate_block<Cfg, R, X>(acc, cols, o0, x0, w, ldw, rows_i, b, alpha, ranges);
  }
  switch (rows_o - o0) {
#define SPATTN_ACCUMULATE_LEFT(count)                                                         \
  case count:                                                                                 \
    if constexpr (count < R) {                                                                \
      accumulate_block<Cfg, count, X>(acc, cols, o0, x0, w, ldw, rows_i, b, alpha, ranges);  \
    }                                                                                         \
    break;
    SPATTN_ACCUMULATE_LEFT(1)
    SPATTN_ACCUMULATE_LEFT(2)
    SPATTN_ACCUMULATE_LEFT(3)
    SPATTN_ACCUMULATE_LEFT(4)
    SPATTN_ACCUMULATE_LEFT(5)
    SPATTN_ACCUMULATE_LEFT(6)
    SPATTN_ACCUMULATE_LEFT(7)
#undef SPATTN_ACCUMULATE_LEFT
    default:
      break;
  }
}

// The other order of the same sums, for a product over at most kMaxBlockRows inner rows: the
// I inner rows of b are held in registers, X vectors at a time, and the accumulator rows stream
// past them (a load and a store per vector, as the register-held block has, but no reload of b
// per block of outer rows: with so few inner rows that reload is what the time goes to).
template <typename Cfg, int I, int X, bool Scale>
SPATTN_KERNEL_INLINE void accumulate_streamed(float* SPATTN_RESTRICT acc, int64_t rows_o, int64_t cols,
                                              int64_t x0, const float* SPATTN_RESTRICT w, int64_t ldw,
                                              const float* SPATTN_RESTRICT b,
                                              const float* SPATTN_RESTRICT alpha) {
  using L = typename Cfg::L;
  using V = typename L::V;
  constexpr int64_t W = L::kLanes;
  V inner[I * X];  // inner[i X + v]: row i of b, vector v
  SPATTN_UNROLL for (int j = 0; j < I * X; ++j) {
    inner[j] = load<L>(b + (j / X) * cols + x0 + (j % X) * W);
  }
  for (int64_t o = 0; o < rows_o; ++o) {
    float* row = acc + o * cols + x0;
    V t[X];
    SPATTN_UNROLL for (int v = 0; v < X; ++v) t[v] = load<L>(row + v * W);
    if constexpr (Scale) {  // rounded before the first add, as in accumulate_block
      SPATTN_UNROLL for (int v = 0; v < X; ++v) {
        t[v] = t[v] * alpha[o];
        keep_in_register(t[v]);
      }
    }
    SPATTN_UNROLL for (int j = 0; j < I * X; ++j) t[j % X] += w[(j / X) * ldw + o] * inner[j];
    SPATTN_UNROLL for (int v = 0; v < X; ++v) store<L>(row + v * W, t[v]);
  }
}

template <typename Cfg, int I, bool Scale>
SPATTN_KERNEL_INLINE void accumulate_streamed_rows(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                                   int64_t ldw, const float* b, const float* alpha) {
  constexpr int64_t W = Cfg::L::kLanes;
  int64_t x0 = 0;
  for (; x0 + W <= cols;) {
    const int64_t left = (cols - x0) / W;
    if constexpr (4 * I <= Cfg::kStreamRegs) {
      if (left >= 4) {
        accumulate_streamed<Cfg, I, 4, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
        x0 += 4 * W;
        continue;
      }
    }
    if constexpr (2 * I <= Cfg::kStreamRegs) {
      if (left >= 2) {
        accumulate_streamed<Cfg, I, 2, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
        x0 += 2 * W;
        continue;
      }
    }
    accumulate_streamed<Cfg, I, 1, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
    x0 += W;
  }
  for (; x0 < cols; ++x0) {  // head_dim not a multiple of the lanes: the same sums, one by one
    for (int64_t o = 0; o < rows_o; ++o) {
      float t = acc[o * cols + x0];
      if constexpr (Scale) {  // rounded before the first add, as in the vectors
        t = t * alpha[o];
        keep_in_register(t);
      }
      SPATTN_UNROLL for (int i = 0; i < I; ++i) t += w[i * ldw + o] * b[i * cols + x0];
      acc[o * cols + x0] = t;
    }
  }
}

// The register-held order (accumulate_block) over any number of inner rows. Compiled as a
// function of its own: inlined into a step, it changes the register allocation of the step's
// other products.
template <typename Cfg>
SPATTN_KERNEL_OUTLINE void accumulate_held(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                           int64_t ldw, int64_t rows_i, const float* b,
                                           const float* alpha, const RowRange* ranges) {
  constexpr int64_t W = Cfg::L::kLanes;
  constexpr int R = Cfg::kHeldRows, X = Cfg::kHeldVectors;
  int64_t x0 = 0;
  for (; x0 + X * W <= cols; x0 += X * W) {
    accumulate_columns<Cfg, R, X>(acc, rows_o, cols, x0, w, ldw, rows_i, b, alpha, ranges);
  }
  for (; x0 + W <= cols; x0 += W) {  // the vectors left, one at a time
    accumulate_columns<Cfg, R, 1>(acc, rows_o, cols, x0, w, ldw, rows_i, b, alpha, ranges);
  }
  for (; x0 < cols; ++x0) {  // head_dim not a multiple of the lanes: the same sums, one by one
    for (int64_t o = 0; o < rows_o; ++o) {
      float t = acc[o * cols + x0];
      if (alpha != nullptr) {  // rounded before the first add, as in the vectors
        t = t * alpha[o];
        keep_in_register(t);
      }
      for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
        if (!block_attends(ranges, i0, o, o + 1)) continue;
        const int64_t i1 = rows_i - i0 < kMaxBlockRows ? rows_i : i0 + kMaxBlockRows;
        for (int64_t i = i0; i < i1; ++i) t += w[i * ldw + o] * b[i * cols + x0];
      }
      acc[o * cols + x0] = t;
    }
  }
}

// acc (rows_o, cols) = acc alpha (when alpha != nullptr) + w^T b for w (rows_i, rows_o at ldw)
// and b (rows_i, cols). Over more than kMaxBlockRows inner rows, where the configuration has a
// register-held block (kHeldRows > 0), in that order (accumulate_held); else streamed, in
// blocks of up to kMaxBlockRows inner rows. With `ranges` (attended_ranges; only without alpha) a
// streamed block updates only its attended outer rows: w is 0 on the others.
template <typename Cfg>
SPATTN_KERNEL_INLINE void accumulate_product(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                             int64_t ldw, int64_t rows_i, const float* b,
                                             const float* alpha, const RowRange* ranges = nullptr) {
  if constexpr (Cfg::kHeldRows > 0) {
    if (rows_i > kMaxBlockRows) return accumulate_held<Cfg>(acc, rows_o, cols, w, ldw, rows_i, b, alpha, ranges);
  }
  if (rows_i == 0 && alpha != nullptr) {  // nothing to add: the rescaling alone
    for (int64_t o = 0; o < rows_o; ++o) {
      for (int64_t x = 0; x < cols; ++x) acc[o * cols + x] = acc[o * cols + x] * alpha[o];
    }
    return;
  }
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    const int64_t n = rows_i - i0 < kMaxBlockRows ? rows_i - i0 : kMaxBlockRows;
    RowRange outer;
    if (!outer_rows_of_block(ranges, i0, rows_o, outer)) continue;
    float* acc_rows = acc + outer.begin * cols;
    const int64_t rows = outer.end - outer.begin;
    const float* w_rows = w + i0 * ldw + outer.begin;
    const float* b_rows = b + i0 * cols;
    const float* alpha_rows = alpha != nullptr && i0 == 0 ? alpha + outer.begin : nullptr;
    switch (n) {
#define SPATTN_ACCUMULATE_STREAMED(count)                                                              \
  case count:                                                                                          \
    if (alpha_rows != nullptr) {                                                                       \
      accumulate_streamed_rows<Cfg, count, true>(acc_rows, rows, cols, w_rows, ldw, b_rows, alpha_rows);  \
    } else {                                                                                           \
      accumulate_streamed_rows<Cfg, count, false>(acc_rows, rows, cols, w_rows, ldw, b_rows, nullptr);    \
    }                                                                                                  \
    break;
      SPATTN_ACCUMULATE_STREAMED(1)
      SPATTN_ACCUMULATE_STREAMED(2)
      SPATTN_ACCUMULATE_STREAMED(3)
      SPATTN_ACCUMULATE_STREAMED(4)
      SPATTN_ACCUMULATE_STREAMED(5)
      SPATTN_ACCUMULATE_STREAMED(6)
      SPATTN_ACCUMULATE_STREAMED(7)
      SPATTN_ACCUMULATE_STREAMED(8)
#undef SPATTN_ACCUMULATE_STREAMED
      default:
        break;
    }
  }
}

// accumulate_product over bfloat16 pairs of inner rows, without the forward's rescaling
// (flash_kernels.hpp, "bfloat16 pairs"): defined by flash_kernels_pairs.hpp for the configurations
// with kBf16Pairs.
template <typename Cfg>
void accumulate_product_pairs(float* acc, int64_t rows_o, int64_t cols, const float* w, int64_t ldw,
                              int64_t rows_i, const float* b, const RowRange* ranges);

// A backward step's accumulating product: over bfloat16 pairs where the step's score products
// take them (`pairs`; only for a configuration that has them), else over the floats.
template <typename Cfg>
SPATTN_KERNEL_INLINE void backward_product_of(bool pairs, float* acc, int64_t rows_o, int64_t cols, const float* w,
                                              int64_t ldw, int64_t rows_i, const float* b, const RowRange* ranges) {
  if constexpr (Cfg::kBf16Pairs) {
    if (pairs) return accumulate_product_pairs<Cfg>(acc, rows_o, cols, w, ldw, rows_i, b, ranges);
  }
  accumulate_product<Cfg>(acc, rows_o, cols, w, ldw, rows_i, b, nullptr, ranges);
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
