// Seeded random masks: independent pairs (uniform density) and independent blocks. Both draw with
// geometric skipping, so the cost is O(nnz + rows), not O(seqlen_q * seqlen_k), at small densities.
#include <sparse_formats/patterns.hpp>

#include "format_internal.hpp"
#include "patterns_internal.hpp"

#include <algorithm>
#include <cmath>

namespace sparse_formats {

using namespace patterns_internal;

namespace {

// Appends to `out` the indices in [0, count) kept by independent Bernoulli(p) trials, 0 < p < 1.
template <typename Out>
void bernoulli_indices(SplitMix64& rng, double log1m_p, int64_t count, Out&& out) {
  int64_t next = 0;  // the first index not yet decided
  for (;;) {
    const double gap = geometric_gap(rng, log1m_p);
    if (!(gap < static_cast<double>(count - next))) return;  // beyond the row (or inf)
    next += static_cast<int64_t>(gap);
    out(next);
    if (++next >= count) return;
  }
}

}  // namespace

template <typename Index>
CsrPattern<Index> random_pattern(int64_t seqlen_q, int64_t seqlen_k, double p, uint64_t seed,
                                 bool causal) {
  check_probability("random", "p", p);
  check_shape<Index>("random", seqlen_q, seqlen_k);
  const int64_t offset = seqlen_k - seqlen_q;
  auto row_width = [&](int64_t i) {  // keys a row may draw from
    return causal ? std::clamp<int64_t>(i + offset + 1, 0, seqlen_k) : seqlen_k;
  };
  // Size the storage from the expected count: refuse when it is certain (6 sigma) not to fit,
  // reserve expected + 6 sigma otherwise, so a huge request fails before allocating.
  double cells = static_cast<double>(seqlen_q) * static_cast<double>(seqlen_k);
  if (causal) {  // rows below i0 draw from no key, rows [i0, i1) from i + offset + 1 keys, the rest from all
    const int64_t i0 = std::clamp<int64_t>(-offset, 0, seqlen_q);
    const int64_t i1 = std::clamp<int64_t>(seqlen_k - offset - 1, i0, seqlen_q);
    const double first = static_cast<double>(i0 + offset + 1), last = static_cast<double>(i1 + offset);
    cells = static_cast<double>(i1 - i0) * (first + last) / 2.0 +
            static_cast<double>(seqlen_q - i1) * static_cast<double>(seqlen_k);
  }
  const double expected = cells * p;
  const double sigma = std::sqrt(cells * p * (1.0 - p));
  const double limit = static_cast<double>(index_max<Index>());
  if (expected - 6.0 * sigma > limit) {
    fail("random: expected nnz ", expected, " (p = ", p, " of ", cells, " pairs) exceeds the ",
         sizeof(Index) * 8, "-bit index type's maximum ", index_max<Index>(),
         "; use the int64_t variant");
  }
  // The arrays' least likely size (row offsets and expected - 6 sigma columns) against the machine:
  // refused before anything is allocated.
  const double least_bytes = (static_cast<double>(seqlen_q) + 1.0 + std::max(expected - 6.0 * sigma, 0.0)) *
                             static_cast<double>(sizeof(Index));
  if (least_bytes > static_cast<double>(internal::memory_limit_bytes())) {
    fail("random: the pairs (expected nnz ", expected, ", p = ", p, " of ", cells, " pairs) and row offsets need at least ",
         least_bytes, " bytes, more than the limit of ", internal::memory_limit_bytes(), " bytes (physical memory)");
  }
  std::vector<Index> row_ptr(static_cast<size_t>(seqlen_q) + 1, Index{0});
  std::vector<Index> col_idx;
  col_idx.reserve(static_cast<size_t>(std::min({expected + 6.0 * sigma + 16.0, cells, limit})));

  const double log1m_p = std::log1p(-p);
  for (int64_t i = 0; i < seqlen_q; ++i) {
    const int64_t width = row_width(i);
    if (p >= 1.0) {
      for (int64_t j = 0; j < width; ++j) col_idx.push_back(static_cast<Index>(j));
    } else if (p > 0.0) {
      SplitMix64 rng(seed, static_cast<uint64_t>(i), StreamSalt::random);
      bernoulli_indices(rng, log1m_p, width,
                        [&](int64_t j) { col_idx.push_back(static_cast<Index>(j)); });
    }
    // Checked per row: a row adds at most seqlen_k <= max(Index) entries, so no wrap before this.
    const int64_t nnz = static_cast<int64_t>(col_idx.size());
    if (nnz > index_max<Index>()) fail_nnz<Index>("random", nnz, i + 1);
    row_ptr[static_cast<size_t>(i) + 1] = static_cast<Index>(nnz);
  }
  return CsrPattern<Index>(seqlen_q, seqlen_k, std::move(row_ptr), std::move(col_idx));
}

template <typename Build>
auto random_blocks_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t block_m,
                                        int64_t block_n, double p, uint64_t seed) {
  check_at_least("random_blocks", "block_m", block_m, 1);
  check_at_least("random_blocks", "block_n", block_n, 1);
  check_probability("random_blocks", "p", p);
  const int64_t num_block_cols = ceil_div_safe(std::max<int64_t>(seqlen_k, 0), block_n);
  const double log1m_p = std::log1p(-p);
  // The kept block columns of one block row, drawn once per block row and pass (rows of a block
  // row are visited consecutively).
  int64_t cached_block_row = -1;
  std::vector<int64_t> kept;
  return build("random_blocks", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t block_row = i / block_m;
    if (block_row != cached_block_row) {
      cached_block_row = block_row;
      kept.clear();
      if (p >= 1.0) {
        for (int64_t block_col = 0; block_col < num_block_cols; ++block_col)
          kept.push_back(block_col);
      } else if (p > 0.0) {
        SplitMix64 rng(seed, static_cast<uint64_t>(block_row), StreamSalt::random_blocks);
        bernoulli_indices(rng, log1m_p, num_block_cols,
                          [&](int64_t block_col) { kept.push_back(block_col); });
      }
    }
    for (const int64_t block_col : kept) {
      row.range(block_col * block_n, sat_add(block_col * block_n, block_n));
    }
  });
}

template <typename Index>
CsrPattern<Index> random_blocks_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t block_m, int64_t block_n, double p, uint64_t seed) {
  return random_blocks_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, block_m, block_n, p, seed);
}
std::optional<IntervalPattern> patterns_internal::random_blocks_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t block_m, int64_t block_n, double p, uint64_t seed) {
  return random_blocks_rows(IntervalRows{}, seqlen_q, seqlen_k, block_m, block_n, p, seed);
}

template CsrPattern<int32_t> random_pattern<int32_t>(int64_t, int64_t, double, uint64_t, bool);
template CsrPattern<int64_t> random_pattern<int64_t>(int64_t, int64_t, double, uint64_t, bool);
template CsrPattern<int32_t> random_blocks_pattern<int32_t>(int64_t, int64_t, int64_t, int64_t,
                                                            double, uint64_t);
template CsrPattern<int64_t> random_blocks_pattern<int64_t>(int64_t, int64_t, int64_t, int64_t,
                                                            double, uint64_t);

}  // namespace sparse_formats
