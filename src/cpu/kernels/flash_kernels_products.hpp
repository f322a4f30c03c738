// The flash kernels' products (flash_kernels.hpp): the score products and the accumulating
// products, written once over a configuration: a lane type (flash_kernels_lanes.hpp) and the
// vector registers a register block may take. Included through flash_kernels_impl.hpp by one
// translation unit per instruction set (flash_kernels_lanes.hpp says why).
//
// Order of operations (what makes a result independent of threads and of how a tile is blocked):
// a score product sums head_dim in K interleaved partial sums (x = k mod K), combined by a fixed
// pairwise tree, K set by the block shape so that enough multiply-adds are in flight; an
// accumulator adds its inner rows in order, after the forward's rescaling.
#pragma once

#include "cpu/kernels/flash_kernels.hpp"
#include "cpu/kernels/flash_kernels_isa.hpp"
#include "cpu/kernels/flash_kernels_lanes.hpp"
#include "cpu/kernels/flash_kernels_ranges.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

// Lanes: the lane type. ScoreRegs: accumulators a score block may hold. AccumulateRegs: vectors
// of the inner tile an accumulating block holds (the rest of the 16 or 32 registers go to the
// streamed operand and the outputs).
template <typename Lanes, int ScoreRegs, int AccumulateRegs>
struct Config {
  using L = Lanes;
  static constexpr int kScoreRegs = ScoreRegs;
  static constexpr int kAccumulateRegs = AccumulateRegs;
};

// ---- score products -----------------------------------------------------------------------

// What a score product writes, from its sum `dot` and, per element, `stat` (LSE or D) and the old
// entry `old`:
//   scale        s = scale dot                                (forward scores)
//   probability  s = exp(scale dot - stat), 0 if stat = -inf  (P from LSE)
//   gradient     s = old (dot - stat)                         (dS = P ∘ (dP - D))
enum class Epilogue { scale, probability, gradient };

// Where the statistics of an epilogue live: per outer row (LSE or D of the forward's and the dQ
// pass's query tile) or per inner row (the dK/dV pass's streamed query tile).
struct EpilogueSpec {
  Epilogue kind = Epilogue::scale;
  bool stats_on_inner = false;
  float scale = 1.0f;
  const float* stats = nullptr;  // per inner row: already offset to the block's first row
};

// Partial sums per output vector: enough that 8 multiply-add chains are in flight (latency 4 x 2
// issued per cycle), within `regs` accumulators.
constexpr int partial_sums(int outputs, int regs) {
  int k = 1;
  while (k * outputs < 8 && 2 * k * outputs <= regs) k *= 2;
  return k;
}

// The epilogue of I x C output vectors, dot[i C + c] (chosen at run time: it runs once per block,
// after the head_dim loop, so one compiled loop serves all kinds).
template <typename L, int I, int C>
SPATTN_KERNEL_INLINE void write_block(const typename L::V* dot, const EpilogueSpec& e,
                                      const int64_t* start, const int64_t* first, int64_t rows_o,
                                      float* s) {
  using V = typename L::V;
  SPATTN_UNROLL for (int j = 0; j < I * C; ++j) {
    const int i = j / C, c = j % C;
    float* out = s + i * rows_o + start[c];
    V value;
    if (e.kind == Epilogue::scale) {
      value = dot[j] * e.scale;
    } else {
      const V stat = e.stats_on_inner ? splat<L>(e.stats[i]) : load<L>(e.stats + start[c]);
      if (e.kind == Epilogue::probability) {
        const V p = exp_lanes<L>(dot[j] * e.scale - stat);
        value = stat == splat<L>(kNegInf) ? splat<L>(0.0f) : p;
      } else {
        value = load<L>(out) * (dot[j] - stat);
      }
    }
    if (first[c] == 0) {
      store<L>(out, value);
    } else {
      store_from<L>(out, value, first[c]);
    }
  }
}

// I inner rows against C chunks of kLanes outer rows, chunks chunk0 .. chunk0 + C - 1:
//   s[i][o] = epilogue(sum_x a[i][x] bt[x][o]).
// The last chunk of a row (when rows_o is not a multiple of kLanes) is moved back to end at
// rows_o: it overlaps the chunk before, recomputes those sums (the same values) and writes only
// its new lanes. a: (I, d) at stride d; bt: (d, rows_o); s: (I, rows_o).
// Register arrays are indexed by one flat index per loop (GCC keeps them in registers only when
// every loop over them unrolls in its first unrolling pass, which takes innermost loops).
template <typename Cfg, int I, int C>
SPATTN_KERNEL_INLINE void score_block(const float* SPATTN_RESTRICT a, const float* SPATTN_RESTRICT bt,
                                      int64_t rows_o, int64_t d, int64_t chunk0,
                                      const EpilogueSpec& e, float* SPATTN_RESTRICT s) {
  using L = typename Cfg::L;
  using V = typename L::V;
  constexpr int64_t W = L::kLanes;
  constexpr int N = I * C;                          // output vectors
  constexpr int K = partial_sums(N, Cfg::kScoreRegs);  // partial sums of each
  int64_t start[C], first[C];
  SPATTN_UNROLL for (int c = 0; c < C; ++c) {
    const int64_t o = (chunk0 + c) * W;
    start[c] = o + W <= rows_o ? o : rows_o - W;
    first[c] = o - start[c];
  }
  V acc[K * N];  // acc[k N + i C + c]: partial sum k (x = k mod K) of row i, chunk c
  SPATTN_UNROLL for (int j = 0; j < K * N; ++j) acc[j] = splat<L>(0.0f);
  int64_t x = 0;
  for (; x + K <= d; x += K) {
    V b[K * C];
    SPATTN_UNROLL for (int j = 0; j < K * C; ++j) {
      b[j] = load<L>(bt + (x + j / C) * rows_o + start[j % C]);
      if constexpr (I > 1) keep_in_register(b[j]);
    }
    SPATTN_UNROLL for (int j = 0; j < K * N; ++j) {
      const int k = j / N, i = (j % N) / C, c = j % C;
      acc[j] += a[i * d + x + k] * b[k * C + c];
    }
  }
  // The last d mod K values of x, each still summed into partial sum x mod K.
  for (int64_t k = 0; x + k < d; ++k) {
    V b[C];
    SPATTN_UNROLL for (int c = 0; c < C; ++c) b[c] = load<L>(bt + (x + k) * rows_o + start[c]);
    V part[N];
    SPATTN_UNROLL for (int j = 0; j < N; ++j) part[j] = a[(j / C) * d + x + k] * b[j % C];
    SPATTN_UNROLL for (int j = 0; j < K * N; ++j) {
      if (j / N == k) acc[j] += part[j % N];
    }
  }
  // Partial sums combined in a fixed tree: (p0 + p4) ..., then (p0 + p2) ..., then p0 + p1.
  if constexpr (K >= 8) {
    SPATTN_UNROLL for (int j = 0; j < 4 * N; ++j) acc[j] += acc[j + 4 * N];
  }
  if constexpr (K >= 4) {
    SPATTN_UNROLL for (int j = 0; j < 2 * N; ++j) acc[j] += acc[j + 2 * N];
  }
  if constexpr (K >= 2) {
    SPATTN_UNROLL for (int j = 0; j < N; ++j) acc[j] += acc[j + N];
  }
  write_block<L, I, C>(acc, e, start, first, rows_o, s);
}

// Chunks [chunk, chunks) of I inner rows, C chunks at a time (as many as the registers allow).
template <typename Cfg, int I>
SPATTN_KERNEL_INLINE void score_rows(const float* a, const float* bt, int64_t rows_o, int64_t d,
                                     const EpilogueSpec& e, float* s, int64_t chunk, int64_t chunks) {
  while (chunk < chunks) {
    const int64_t left = chunks - chunk;
    if constexpr (4 * I <= Cfg::kScoreRegs) {
      if (left >= 4) {
        score_block<Cfg, I, 4>(a, bt, rows_o, d, chunk, e, s);
        chunk += 4;
        continue;
      }
    }
    if constexpr (3 * I <= Cfg::kScoreRegs) {
      if (left == 3) {
        score_block<Cfg, I, 3>(a, bt, rows_o, d, chunk, e, s);
        chunk += 3;
        continue;
      }
    }
    if constexpr (2 * I <= Cfg::kScoreRegs) {
      if (left >= 2) {
        score_block<Cfg, I, 2>(a, bt, rows_o, d, chunk, e, s);
        chunk += 2;
        continue;
      }
    }
    score_block<Cfg, I, 1>(a, bt, rows_o, d, chunk, e, s);
    chunk += 1;
  }
}

// s (rows_i, rows_o) = epilogue(a bt) for a (rows_i, d) row-major and bt (d, rows_o).
// Requires rows_o >= kLanes (the steps take the scalar kernels otherwise). With `ranges` (one per
// block of kMaxBlockRows inner rows, attended_ranges) only the chunks of lanes that hold a block's
// attended outer rows are computed: the rest of s is left for apply_bits to fill.
template <typename Cfg>
SPATTN_KERNEL_INLINE void score_product(const float* a, int64_t rows_i, const float* bt,
                                        int64_t rows_o, int64_t d, EpilogueSpec e, float* s,
                                        const RowRange* ranges) {
  constexpr int64_t W = Cfg::L::kLanes;
  const float* stats = e.stats;
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    const int64_t n = rows_i - i0 < kMaxBlockRows ? rows_i - i0 : kMaxBlockRows;
    int64_t chunk_begin = 0, chunk_end = (rows_o + W - 1) / W;
    if (ranges != nullptr) {
      const RowRange range = ranges[i0 / kMaxBlockRows];
      if (range.begin >= range.end) continue;
      chunk_begin = range.begin / W;
      chunk_end = (range.end + W - 1) / W;
    }
    const float* a_rows = a + i0 * d;
    if (e.stats_on_inner) e.stats = stats + i0;
    float* s_rows = s + i0 * rows_o;
    switch (n) {
#define SPATTN_SCORE_CASE(count)                                \
  case count:                                                   \
    score_rows<Cfg, count>(a_rows, bt, rows_o, d, e, s_rows,    \
                           chunk_begin, chunk_end);             \
    break;
      SPATTN_SCORE_CASE(1)
      SPATTN_SCORE_CASE(2)
      SPATTN_SCORE_CASE(3)
      SPATTN_SCORE_CASE(4)
      SPATTN_SCORE_CASE(5)
      SPATTN_SCORE_CASE(6)
      SPATTN_SCORE_CASE(7)
      SPATTN_SCORE_CASE(8)
#undef SPATTN_SCORE_CASE
      default:
        break;
    }
  }
}

// ---- accumulating products ------------------------------------------------------------------

// Columns [x0, x0 + X kLanes) of acc: acc[o][x] = acc[o][x] alpha[o] (when Scale)
// + sum_{i < I} w[i][o] b[i][x], for o < rows_o. acc (rows_o, cols); w rows at ldw; b (I, cols).
template <typename Cfg, int I, int X, bool Scale>
SPATTN_KERNEL_INLINE void accumulate_block(float* SPATTN_RESTRICT acc, int64_t rows_o, int64_t cols,
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
    if constexpr (Scale) {
      SPATTN_UNROLL for (int v = 0; v < X; ++v) t[v] = t[v] * alpha[o];
    }
    SPATTN_UNROLL for (int j = 0; j < I * X; ++j) t[j % X] += w[(j / X) * ldw + o] * inner[j];
    SPATTN_UNROLL for (int v = 0; v < X; ++v) store<L>(row + v * W, t[v]);
  }
}

template <typename Cfg, int I, bool Scale>
SPATTN_KERNEL_INLINE void accumulate_rows(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                          int64_t ldw, const float* b, const float* alpha) {
  constexpr int64_t W = Cfg::L::kLanes;
  int64_t x0 = 0;
  while (x0 + W <= cols) {
    const int64_t left = (cols - x0) / W;
    if constexpr (4 * I <= Cfg::kAccumulateRegs) {
      if (left >= 4) {
        accumulate_block<Cfg, I, 4, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
        x0 += 4 * W;
        continue;
      }
    }
    if constexpr (2 * I <= Cfg::kAccumulateRegs) {
      if (left >= 2) {
        accumulate_block<Cfg, I, 2, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
        x0 += 2 * W;
        continue;
      }
    }
    accumulate_block<Cfg, I, 1, Scale>(acc, rows_o, cols, x0, w, ldw, b, alpha);
    x0 += W;
  }
  for (; x0 < cols; ++x0) {  // head_dim not a multiple of the lanes: the same sums, one by one
    for (int64_t o = 0; o < rows_o; ++o) {
      float t = acc[o * cols + x0];
      if constexpr (Scale) t = t * alpha[o];
      SPATTN_UNROLL for (int i = 0; i < I; ++i) t += w[i * ldw + o] * b[i * cols + x0];
      acc[o * cols + x0] = t;
    }
  }
}

// acc (rows_o, cols) = acc alpha (when alpha != nullptr) + w^T b for w (rows_i, rows_o at ldw)
// and b (rows_i, cols): the inner rows are added in order, in blocks of up to kMaxBlockRows.
// With `ranges` (attended_ranges; only without alpha) a block updates only its attended outer
// rows: w is 0 on the others.
template <typename Cfg>
SPATTN_KERNEL_INLINE void accumulate_product(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                             int64_t ldw, int64_t rows_i, const float* b,
                                             const float* alpha, const RowRange* ranges = nullptr) {
  if (rows_i == 0 && alpha != nullptr) {  // nothing to add: the rescaling alone
    for (int64_t o = 0; o < rows_o; ++o) {
      for (int64_t x = 0; x < cols; ++x) acc[o * cols + x] = acc[o * cols + x] * alpha[o];
    }
    return;
  }
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    const int64_t n = rows_i - i0 < kMaxBlockRows ? rows_i - i0 : kMaxBlockRows;
    RowRange outer{0, rows_o};
    if (ranges != nullptr) {
      outer = ranges[i0 / kMaxBlockRows];
      if (outer.begin >= outer.end) continue;
    }
    float* acc_rows = acc + outer.begin * cols;
    const int64_t rows = outer.end - outer.begin;
    const float* w_rows = w + i0 * ldw + outer.begin;
    const float* b_rows = b + i0 * cols;
    const bool scale = alpha != nullptr && i0 == 0;
    switch (n) {
#define SPATTN_ACCUMULATE_CASE(count)                                                      \
  case count:                                                                              \
    if (scale) {                                                                           \
      accumulate_rows<Cfg, count, true>(acc_rows, rows, cols, w_rows, ldw, b_rows, alpha);  \
    } else {                                                                               \
      accumulate_rows<Cfg, count, false>(acc_rows, rows, cols, w_rows, ldw, b_rows, alpha); \
    }                                                                                      \
    break;
      SPATTN_ACCUMULATE_CASE(1)
      SPATTN_ACCUMULATE_CASE(2)
      SPATTN_ACCUMULATE_CASE(3)
      SPATTN_ACCUMULATE_CASE(4)
      SPATTN_ACCUMULATE_CASE(5)
      SPATTN_ACCUMULATE_CASE(6)
      SPATTN_ACCUMULATE_CASE(7)
      SPATTN_ACCUMULATE_CASE(8)
#undef SPATTN_ACCUMULATE_CASE
      default:
        break;
    }
  }
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
