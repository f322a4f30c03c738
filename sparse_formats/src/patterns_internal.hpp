// Machinery shared by the pattern generators: argument checks, overflow-safe position arithmetic,
// the two-pass row builder and the seeded random generator. Private to sparse_formats.
#pragma once

#include "format_internal.hpp"

#include <sparse_formats/csr.hpp>
#include <sparse_formats/error.hpp>
#include <sparse_formats/intervals.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace sparse_formats::patterns_internal {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

template <typename Index>
constexpr int64_t index_max() {
  static_assert(std::is_same_v<Index, int32_t> || std::is_same_v<Index, int64_t>,
                "Index is int32_t or int64_t");
  return static_cast<int64_t>(std::numeric_limits<Index>::max());
}

// Saturating arithmetic: huge parameters (w = 2^63 - 1) mean "everything", never overflow.
inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return b > 0 ? kInt64Max : kInt64Min;
  return out;
}
inline int64_t sat_sub(int64_t a, int64_t b) {
  int64_t out = 0;
  if (__builtin_sub_overflow(a, b, &out)) return b < 0 ? kInt64Max : kInt64Min;
  return out;
}
inline int64_t sat_mul(int64_t a, int64_t b) {  // a, b >= 0
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return kInt64Max;
  return out;
}
// Floor division and non-negative remainder for any sign of a, b >= 1.
inline int64_t floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }
// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b.
inline int64_t ceil_div_safe(int64_t a, int64_t b) { return a == 0 ? 0 : 1 + (a - 1) / b; }

inline void check_at_least(const char* pattern, const char* key, int64_t value, int64_t min) {
  if (value < min) fail(pattern, ": ", key, " = ", value, " must be >= ", min);
}
inline void check_probability(const char* pattern, const char* key, double value) {
  if (!(value >= 0.0 && value <= 1.0)) {
    fail(pattern, ": ", key, " = ", value, " must be a probability in [0, 1]");
  }
}

// seqlen_q, seqlen_k >= 0 and each fits Index (so the transpose is representable too).
template <typename Index>
void check_shape(const char* pattern, int64_t seqlen_q, int64_t seqlen_k) {
  check_at_least(pattern, "seqlen_q", seqlen_q, 0);
  check_at_least(pattern, "seqlen_k", seqlen_k, 0);
  for (const auto& [name, value] :
       {std::pair{"seqlen_q", seqlen_q}, std::pair{"seqlen_k", seqlen_k}}) {
    if (value > index_max<Index>()) {
      fail(pattern, ": ", name, " = ", value, " does not fit the ", sizeof(Index) * 8,
           "-bit index type (max ", index_max<Index>(), "); use the int64_t variant");
    }
  }
}

// Counting stops at the limit: `so_far` entries were found in the first `rows` rows.
template <typename Index>
[[noreturn]] void fail_nnz(const char* pattern, int64_t so_far, int64_t rows) {
  fail(pattern, ": nnz exceeds the ", sizeof(Index) * 8, "-bit index type's maximum ",
       index_max<Index>(), " (", so_far, " entries in the first ", rows,
       " rows); use the int64_t variant");
}

// A row is described to a sink as increasing, disjoint pieces; sinks clip every piece to the
// key range [0, num_cols), so generators may pass unclipped (even negative) bounds.
//   range(lo, hi)                    keys lo <= j < hi
//   residues(lo, hi, period, a, b)   keys lo <= j < hi with a <= j mod period < b,
//                                    0 <= a < b <= period
// RowCounter counts a row in O(pieces); RowWriter writes it in O(pieces + entries).
struct RowCounter {
  int64_t num_cols = 0;
  int64_t count = 0;

  void range(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > num_cols ? num_cols : hi;
    if (lo < hi) count += hi - lo;
  }
  void residues(int64_t lo, int64_t hi, int64_t period, int64_t a, int64_t b) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > num_cols ? num_cols : hi;
    if (lo < hi) count += below(hi, period, a, b) - below(lo, period, a, b);
  }

  // Number of keys j in [0, x) with a <= j mod period < b.
  static int64_t below(int64_t x, int64_t period, int64_t a, int64_t b) {
    const int64_t rem = x % period;
    const int64_t partial = rem <= a ? 0 : (rem >= b ? b - a : rem - a);
    return (x / period) * (b - a) + partial;
  }
};

// Describes residues(lo, hi, period, a, b) to `sink` as ranges: the periods that overlap [lo, hi)
// clipped to [0, num_cols), each contributing the keys [base + a, base + b).
template <typename Sink>
void walk_residues(int64_t num_cols, int64_t lo, int64_t hi, int64_t period, int64_t a, int64_t b, Sink& sink) {
  lo = lo < 0 ? 0 : lo;
  hi = hi > num_cols ? num_cols : hi;
  if (lo >= hi) return;
  int64_t base = (lo / period) * period;
  for (;;) {
    const int64_t first = sat_add(base, a);
    const int64_t last = sat_add(base, b);
    sink.range(lo > first ? lo : first, hi < last ? hi : last);
    if (base >= hi - period) break;
    base += period;
  }
}

template <typename Index>
struct RowWriter {
  int64_t num_cols = 0;
  Index* out = nullptr;  // next free slot of col_idx
  Index* end = nullptr;  // one past this row's slots (the counting pass sized it)

  void range(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > num_cols ? num_cols : hi;
    assert(lo >= hi || end - out >= hi - lo);
    for (int64_t j = lo; j < hi; ++j) *out++ = static_cast<Index>(j);
  }
  void residues(int64_t lo, int64_t hi, int64_t period, int64_t a, int64_t b) {
    walk_residues(num_cols, lo, hi, period, a, b, *this);
  }
};

// Builds a pattern from `row(i, sink)`, a callable that describes row i to any sink (a generic
// lambda). Pass one counts every row, checks the total fits Index and sizes col_idx exactly; pass
// two writes. Refusing an oversized pattern therefore allocates nothing but row_ptr.
template <typename Index, typename RowFn>
CsrPattern<Index> build_rows(const char* pattern, int64_t seqlen_q, int64_t seqlen_k, RowFn&& row) {
  check_shape<Index>(pattern, seqlen_q, seqlen_k);
  std::vector<Index> row_ptr = internal::allocate<Index>(
      pattern, [&] { return "row_ptr (seqlen_q + 1 offsets)"; }, internal::saturating_plus_one(seqlen_q));
  int64_t nnz = 0;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    RowCounter counter{seqlen_k, 0};
    row(i, counter);
    if (counter.count > index_max<Index>() - nnz) {
      fail_nnz<Index>(pattern, sat_add(nnz, counter.count), i + 1);
    }
    nnz += counter.count;
    row_ptr[static_cast<size_t>(i) + 1] = static_cast<Index>(nnz);
  }
  // Sized by the count: a pattern past the machine's memory is refused with its nnz, not tried.
  std::vector<Index> col_idx = internal::allocate<Index>(
      pattern, [&] { return "col_idx (nnz = " + std::to_string(nnz) + " attended pairs)"; }, nnz);
  for (int64_t i = 0; i < seqlen_q; ++i) {
    RowWriter<Index> writer{seqlen_k, col_idx.data() + row_ptr[static_cast<size_t>(i)],
                            col_idx.data() + row_ptr[static_cast<size_t>(i) + 1]};
    row(i, writer);
    assert(writer.out == writer.end);
  }
  return CsrPattern<Index>(seqlen_q, seqlen_k, std::move(row_ptr), std::move(col_idx));
}

// IntervalSink takes a row's pieces as intervals: clipped, touching pieces merged (the canonical
// form). Without arrays it only counts; with them it also writes the row's slots.
struct IntervalSink {
  explicit IntervalSink(int64_t cols, int64_t* first = nullptr, int64_t* last = nullptr)
      : num_cols(cols), begin(first), end(last) {}

  int64_t num_cols = 0;
  int64_t* begin = nullptr;  // the row's first slots (nullptr: count only)
  int64_t* end = nullptr;
  int64_t count = 0;         // intervals of the row so far
  int64_t keys = 0;          // keys of the row so far
  bool strided = false;      // a residue class of a period took part (a piece per period)

  void range(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo;
    hi = hi > num_cols ? num_cols : hi;
    if (lo >= hi) return;
    keys += hi - lo;
    if (count > 0 && last_end_ == lo) {  // pieces ascend and are disjoint: touching ones merge
      last_end_ = hi;
      if (end != nullptr) end[count - 1] = hi;
      return;
    }
    if (begin != nullptr) {
      begin[count] = lo;
      end[count] = hi;
    }
    ++count;
    last_end_ = hi;
  }
  void residues(int64_t lo, int64_t hi, int64_t period, int64_t a, int64_t b) {
    strided = strided || b - a < period;
    if (begin != nullptr || b - a == period) {
      walk_residues(num_cols, lo, hi, period, a, b, *this);
      return;
    }
    // Counting: the pieces in O(1), not one by one (a strided row has pos / stride of them).
    lo = lo < 0 ? 0 : lo;
    hi = hi > num_cols ? num_cols : hi;
    if (lo >= hi) return;
    int64_t first = (lo / period) * period;  // the first and last periods with a nonempty piece
    if (sat_add(first, b) <= lo) first += period;
    int64_t last = ((hi - 1) / period) * period;
    if (sat_add(last, a) >= hi) last -= period;
    if (last < first) return;
    keys += RowCounter::below(hi, period, a, b) - RowCounter::below(lo, period, a, b);
    const int64_t pieces = (last - first) / period + 1;
    const bool touches = count > 0 && last_end_ == std::max(lo, sat_add(first, a));  // merges
    count += touches ? pieces - 1 : pieces;
    last_end_ = std::min(hi, sat_add(last, b));
  }

 private:
  int64_t last_end_ = 0;
};

// The interval form of `row(i, sink)` (build_rows' row description), or std::nullopt for a
// pattern of residue classes (strided keys) whose rows average fewer than kMinMeanIntervalLength
// keys per interval (the pairs are then the cheaper form); a pattern of key ranges is always
// intervals. Pass one counts, pass two writes into arrays sized exactly (refused past the
// machine's memory before anything but row_ptr is allocated).
template <typename RowFn>
std::optional<IntervalPattern> build_interval_rows(const char* pattern, int64_t seqlen_q, int64_t seqlen_k,
                                                   RowFn&& row) {
  check_shape<int64_t>(pattern, seqlen_q, seqlen_k);
  std::vector<int64_t> row_ptr = internal::allocate<int64_t>(
      pattern, [&] { return "row_ptr (seqlen_q + 1 offsets)"; }, internal::saturating_plus_one(seqlen_q));
  int64_t keys = 0;
  bool strided = false;
  for (int64_t i = 0; i < seqlen_q; ++i) {
    IntervalSink counter{seqlen_k};
    row(i, counter);
    keys = sat_add(keys, counter.keys);
    strided = strided || counter.strided;
    row_ptr[static_cast<size_t>(i) + 1] = row_ptr[static_cast<size_t>(i)] + counter.count;
  }
  const int64_t intervals = row_ptr.back();
  if (strided && intervals > 0 && keys / intervals < kMinMeanIntervalLength) return std::nullopt;
  const auto what = [&] { return "begin, end (" + std::to_string(intervals) + " intervals)"; };
  std::vector<int64_t> begin = internal::allocate<int64_t>(pattern, what, intervals);
  std::vector<int64_t> end = internal::allocate<int64_t>(pattern, what, intervals);
  for (int64_t i = 0; i < seqlen_q; ++i) {
    IntervalSink writer{seqlen_k, begin.data() + row_ptr[static_cast<size_t>(i)], end.data() + row_ptr[static_cast<size_t>(i)]};
    row(i, writer);
    assert(writer.count == row_ptr[static_cast<size_t>(i) + 1] - row_ptr[static_cast<size_t>(i)]);
  }
  return IntervalPattern(seqlen_q, seqlen_k, std::move(row_ptr), std::move(begin), std::move(end));
}

// The two forms a generator's row description builds: each generator is written once as
// `xxx_rows(build, ...)` and instantiated with these.
template <typename Index>
struct CsrRows {
  void check_shape(const char* pattern, int64_t seqlen_q, int64_t seqlen_k) const {
    patterns_internal::check_shape<Index>(pattern, seqlen_q, seqlen_k);
  }
  template <typename RowFn>
  CsrPattern<Index> operator()(const char* pattern, int64_t seqlen_q, int64_t seqlen_k, RowFn&& row) const {
    return build_rows<Index>(pattern, seqlen_q, seqlen_k, row);
  }
};
struct IntervalRows {
  void check_shape(const char* pattern, int64_t seqlen_q, int64_t seqlen_k) const {
    patterns_internal::check_shape<int64_t>(pattern, seqlen_q, seqlen_k);
  }
  template <typename RowFn>
  std::optional<IntervalPattern> operator()(const char* pattern, int64_t seqlen_q, int64_t seqlen_k,
                                            RowFn&& row) const {
    return build_interval_rows(pattern, seqlen_q, seqlen_k, row);
  }
};

// The interval forms of the generators that describe rows as pieces (patterns.hpp has their
// definitions; each checks its values as the CSR generator does). std::nullopt as above.
std::optional<IntervalPattern> full_intervals(int64_t seqlen_q, int64_t seqlen_k);
std::optional<IntervalPattern> causal_intervals(int64_t seqlen_q, int64_t seqlen_k);
std::optional<IntervalPattern> sliding_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w, bool causal);
std::optional<IntervalPattern> dilated_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w,
                                                        int64_t dilation, bool causal);
std::optional<IntervalPattern> global_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t g,
                                                       bool causal);
std::optional<IntervalPattern> prefix_lm_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t p);
std::optional<IntervalPattern> strided_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, bool causal);
std::optional<IntervalPattern> fixed_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, int64_t c,
                                               bool causal);
std::optional<IntervalPattern> bigbird_intervals(int64_t seqlen_q, int64_t seqlen_k, const BigBirdParams& params);
std::optional<IntervalPattern> documents_intervals(int64_t seqlen_q, int64_t seqlen_k,
                                                   const std::vector<int64_t>& lengths,
                                                   const std::vector<int64_t>& lengths_k, bool causal);
std::optional<IntervalPattern> random_blocks_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t block_m,
                                                       int64_t block_n, double p, uint64_t seed);

// splitmix64 (Steele, Lea, Flood 2014): 64-bit state, passes BigCrush, and every operation is
// exact integer arithmetic, so a seed gives the same masks with every compiler and library.
// Streams: one generator per (seed, stream, salt), so row i's draws do not depend on other rows;
// each pattern passes its own salt so that equal seeds do not correlate different patterns.
enum class StreamSalt : uint64_t {
  random = 0xD1B54A32D192ED03ull,
  random_blocks = 0x8CB92BA72F3D8DD7ull,
  bigbird = 0xABC98388FB8FAC03ull,
};
class SplitMix64 {
 public:
  SplitMix64(uint64_t seed, uint64_t stream, StreamSalt salt)
      : state_(mix(seed ^ mix(stream ^ static_cast<uint64_t>(salt)))) {}

  uint64_t next() {
    state_ += kGolden;
    return mix(state_);
  }
  // Uniform in (0, 1]: 53 random bits, never 0 (so its log is finite).
  double uniform_open0() { return static_cast<double>((next() >> 11) + 1) * 0x1.0p-53; }
  // Uniform in [0, bound), bound >= 1, unbiased (rejects the short top range).
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    for (;;) {
      const uint64_t x = next();
      if (x >= threshold) return x % bound;
    }
  }

 private:
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

// Geometric skipping: the number of failures before the next success of Bernoulli(p) trials,
// 0 < p < 1, as a double (it can exceed any row; callers compare before converting).
// floor(log(U) / log(1 - p)) with U uniform in (0, 1] has exactly that distribution.
inline double geometric_gap(SplitMix64& rng, double log1m_p) {
  return std::floor(std::log(rng.uniform_open0()) / log1m_p);
}

}  // namespace sparse_formats::patterns_internal
