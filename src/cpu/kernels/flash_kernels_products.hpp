// The flash kernels' score products (flash_kernels.hpp) and the configuration they and the
// accumulating products (flash_kernels_accumulate.hpp) are written over: a lane type
// (flash_kernels_lanes.hpp) and the vector registers a register block may take. Included through flash_kernels_impl.hpp by one
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

// Lanes: the lane type. ScoreRegs: accumulators a score block may hold. StreamRegs: vectors of the
// inner tile a streamed accumulating block holds (accumulate_streamed). HeldRows x HeldVectors: the
// block of an accumulator a register-held accumulating block keeps (accumulate_block; 0 x 0: this
// configuration always streams). The rest of the 16 or 32 registers take the operands streamed.
// Bf16Pairs: the score products take outer tiles packed as bfloat16 pairs (flash_kernels_pairs.hpp,
// whose translation unit alone defines score_product_pairs).
template <typename Lanes, int ScoreRegs, int StreamRegs, int HeldRows, int HeldVectors, bool Bf16Pairs = false>
struct Config {
  using L = Lanes;
  // x86-64's vector registers: 32 with AVX-512 (the 16-lane type), else 16.
  static constexpr int kVectorRegs = Lanes::kLanes == 16 ? 32 : 16;
  static constexpr int kScoreRegs = ScoreRegs;
  static constexpr int kStreamRegs = StreamRegs;
  static constexpr int kHeldRows = HeldRows;
  static constexpr int kHeldVectors = HeldVectors;
  static constexpr bool kBf16Pairs = Bf16Pairs;
  static_assert(HeldRows * HeldVectors + HeldVectors + 1 <= kVectorRegs, "a held block spills");
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

// Partial sums per output vector: enough that `chains` multiply-add chains are in flight (the
// product's latency x the instructions issued per cycle), within `regs` accumulators.
constexpr int partial_sums(int outputs, int regs, int chains) {
  int k = 1;
  while (k * outputs < chains && 2 * k * outputs <= regs) k *= 2;
  return k;
}

// The multiply-add a score product is built from, over float operands: one element of a
// (broadcast) times a vector of a row of bt. Eight chains in flight: FMA latency 4 x 2 issued per
// cycle. (The bfloat16 pairs of flash_kernels_pairs.hpp are the other kind.)
template <typename L>
struct FloatProduct {
  using Element = float;    // what a and bt hold
  using B = typename L::V;  // a vector of bt's row
  static constexpr int kChains = 8;
  static SPATTN_KERNEL_INLINE B load_b(const float* p) { return load<L>(p); }
  static SPATTN_KERNEL_INLINE typename L::V mul(float a, B b) { return a * b; }
  static SPATTN_KERNEL_INLINE void madd(typename L::V& acc, float a, B b) { acc += a * b; }
};

// Whether a score block of I inner rows by C chunks fits the registers: its K N accumulators, the
// K C vectors of bt it holds (when I > 1: with one inner row they are read by the multiply-adds
// themselves) and one broadcast. A block that does not fit spills an accumulator to the stack and
// back on every step of head_dim.
template <typename Cfg, typename Product>
constexpr bool score_block_fits(int rows, int chunks) {
  const int outputs = rows * chunks;
  const int k = partial_sums(outputs, Cfg::kScoreRegs, Product::kChains);
  return outputs <= Cfg::kScoreRegs && k * outputs + (rows > 1 ? k * chunks : 0) + 1 <= Cfg::kVectorRegs;
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
//   s[i][o] = epilogue(sum_x a[i][x] bt[x][o]),
// x over `depth` elements of Product (head_dim floats, or pairs of bfloat16s).
// The last chunk of a row (when rows_o is not a multiple of kLanes) is moved back to end at
// rows_o: it overlaps the chunk before, recomputes those sums (the same values) and writes only
// its new lanes. a: (I, depth) at stride depth; bt: (depth, rows_o); s: (I, rows_o).
// Register arrays are indexed by one flat index per loop (GCC keeps them in registers only when
// every loop over them unrolls in its first unrolling pass, which takes innermost loops).
template <typename Cfg, typename Product, int I, int C>
SPATTN_KERNEL_INLINE void score_block(const typename Product::Element* SPATTN_RESTRICT a,
                                      const typename Product::Element* SPATTN_RESTRICT bt, int64_t rows_o,
                                      int64_t depth, int64_t chunk0, const EpilogueSpec& e,
                                      float* SPATTN_RESTRICT s) {
  using L = typename Cfg::L;
  using V = typename L::V;
  using B = typename Product::B;
  constexpr int64_t W = L::kLanes;
  constexpr int N = I * C;                                                // output vectors
  constexpr int K = partial_sums(N, Cfg::kScoreRegs, Product::kChains);  // partial sums of each
  int64_t start[C], first[C];
  SPATTN_UNROLL for (int c = 0; c < C; ++c) {
    const int64_t o = (chunk0 + c) * W;
    start[c] = o + W <= rows_o ? o : rows_o - W;
    first[c] = o - start[c];
  }
  V acc[K * N];  // acc[k N + i C + c]: partial sum k (x = k mod K) of row i, chunk c
  SPATTN_UNROLL for (int j = 0; j < K * N; ++j) acc[j] = splat<L>(0.0f);
  int64_t x = 0;
  for (; x + K <= depth; x += K) {
    B b[K * C];
    SPATTN_UNROLL for (int j = 0; j < K * C; ++j) {
      b[j] = Product::load_b(bt + (x + j / C) * rows_o + start[j % C]);
      if constexpr (I > 1) keep_in_register(b[j]);
    }
    SPATTN_UNROLL for (int j = 0; j < K * N; ++j) {
      const int k = j / N, i = (j % N) / C, c = j % C;
      Product::madd(acc[j], a[i * depth + x + k], b[k * C + c]);
    }
  }
  // The last depth mod K values of x, each still summed into partial sum x mod K.
  for (int64_t k = 0; x + k < depth; ++k) {
    B b[C];
    SPATTN_UNROLL for (int c = 0; c < C; ++c) b[c] = Product::load_b(bt + (x + k) * rows_o + start[c]);
    V part[N];
    SPATTN_UNROLL for (int j = 0; j < N; ++j) part[j] = Product::mul(a[(j / C) * depth + x + k], b[j % C]);
    SPATTN_UNROLL for (int j = 0; j < K * N; ++j) {
      if (j / N == k) acc[j] += part[j % N];
    }
  }
  // Partial sums combined in a fixed tree: (p0 + p8) ..., then (p0 + p4) ..., then (p0 + p2) ...,
  // then p0 + p1.
  if constexpr (K >= 16) {
    SPATTN_UNROLL for (int j = 0; j < 8 * N; ++j) acc[j] += acc[j + 8 * N];
  }
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
template <typename Cfg, typename Product, int I>
SPATTN_KERNEL_INLINE void score_rows(const typename Product::Element* a, const typename Product::Element* bt,
                                     int64_t rows_o, int64_t depth, const EpilogueSpec& e, float* s,
                                     int64_t chunk, int64_t chunks) {
  while (chunk < chunks) {
    const int64_t left = chunks - chunk;
    if constexpr (score_block_fits<Cfg, Product>(I, 4)) {
      if (left >= 4) {
        score_block<Cfg, Product, I, 4>(a, bt, rows_o, depth, chunk, e, s);
        chunk += 4;
        continue;
      }
    }
    if constexpr (score_block_fits<Cfg, Product>(I, 3)) {
      if (left == 3 || (left > 3 && !score_block_fits<Cfg, Product>(I, 4))) {  // the widest block that fits
        score_block<Cfg, Product, I, 3>(a, bt, rows_o, depth, chunk, e, s);
        chunk += 3;
        continue;
      }
    }
    if constexpr (score_block_fits<Cfg, Product>(I, 2)) {
      if (left >= 2) {
        score_block<Cfg, Product, I, 2>(a, bt, rows_o, depth, chunk, e, s);
        chunk += 2;
        continue;
      }
    }
    score_block<Cfg, Product, I, 1>(a, bt, rows_o, depth, chunk, e, s);
    chunk += 1;
  }
}

// The chunks of lanes [begin, end) a block of inner rows from i0 computes: all of them, or (with
// `ranges`, one per block of kMaxBlockRows inner rows, attended_ranges) those that hold the
// block's attended outer rows. False when the block attends none.
template <int64_t W>
SPATTN_KERNEL_INLINE bool chunks_of_block(const RowRange* ranges, int64_t i0, int64_t rows_o, int64_t& begin,
                                          int64_t& end) {
  begin = 0;
  end = (rows_o + W - 1) / W;
  if (ranges == nullptr) return true;
  const RowRange range = ranges[i0 / kMaxBlockRows];
  begin = range.begin / W;
  end = (range.end + W - 1) / W;
  return range.begin < range.end;
}

// Calls score_rows for a block of n <= kMaxBlockRows inner rows (n known only at run time).
template <typename Cfg, typename Product>
SPATTN_KERNEL_INLINE void score_block_rows(int64_t n, const typename Product::Element* a,
                                           const typename Product::Element* bt, int64_t rows_o, int64_t depth,
                                           const EpilogueSpec& e, float* s, int64_t chunk_begin,
                                           int64_t chunk_end) {
  switch (n) {
#define SPATTN_SCORE_CASE(count)                                                               \
  case count:                                                                                  \
    score_rows<Cfg, Product, count>(a, bt, rows_o, depth, e, s, chunk_begin, chunk_end);       \
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
    int64_t chunk_begin, chunk_end;
    if (!chunks_of_block<W>(ranges, i0, rows_o, chunk_begin, chunk_end)) continue;
    if (e.stats_on_inner) e.stats = stats + i0;
    score_block_rows<Cfg, FloatProduct<typename Cfg::L>>(n, a + i0 * d, bt, rows_o, d, e, s + i0 * rows_o,
                                                         chunk_begin, chunk_end);
  }
}

// score_product over an outer operand packed as bfloat16 pairs (flash_kernels.hpp,
// pack_bf16_pairs): defined by flash_kernels_pairs.hpp for the configurations with kBf16Pairs.
template <typename Cfg>
void score_product_pairs(const float* a, int64_t rows_i, const uint32_t* bt_pairs,
                                              int64_t rows_o, int64_t width, EpilogueSpec e, float* s,
                                              const RowRange* ranges);

// The score product of a step: over the pairs where the schedule packed the outer operand
// (`packed`: bt points at them; only for a configuration that takes them), else over the floats.
template <typename Cfg>
SPATTN_KERNEL_INLINE void score_product_of(const float* a, int64_t rows_i, const float* bt, bool packed,
                                           int64_t rows_o, int64_t width, EpilogueSpec e, float* s,
                                           const RowRange* ranges) {
  if constexpr (Cfg::kBf16Pairs) {
    if (packed) {
      return score_product_pairs<Cfg>(a, rows_i, reinterpret_cast<const uint32_t*>(bt), rows_o, width, e, s,
                                      ranges);
    }
  }
  score_product<Cfg>(a, rows_i, bt, rows_o, width, e, s, ranges);
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
