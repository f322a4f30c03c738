// BigBird (Zaheer et al. 2020) at block level: window, global and seeded random key blocks per
// query block, expanded to elements. Each query block's key blocks are computed once into a short
// list of block intervals, so the cost is O(nnz + rows + query blocks * (r log r)).
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace sparse_formats {

using namespace patterns_internal;

namespace {

using BlockInterval = std::pair<int64_t, int64_t>;  // key blocks [first, second)

// The key blocks of query block `query_block` as sorted, disjoint, non-adjacent intervals.
std::vector<BlockInterval> bigbird_blocks(int64_t query_block, int64_t num_block_cols,
                                          const BigBirdParams& params) {
  if (query_block >= 0 && query_block < params.g) return {{0, num_block_cols}};  // global row
  const int64_t global_end = std::min(params.g, num_block_cols);
  const int64_t window_lo = std::clamp<int64_t>(sat_sub(query_block, params.w), 0, num_block_cols);
  const int64_t window_hi =
      std::clamp<int64_t>(sat_add(sat_add(query_block, params.w), 1), window_lo, num_block_cols);
  std::vector<BlockInterval> blocks{{0, global_end}, {window_lo, window_hi}};

  // The candidates for random blocks: [global_end, num_block_cols) minus the window, as two pieces.
  const BlockInterval below{global_end, std::max(global_end, window_lo)};
  const BlockInterval above{std::max(global_end, window_hi), num_block_cols};
  const int64_t below_size = below.second - below.first;
  const int64_t candidates = below_size + std::max<int64_t>(0, above.second - above.first);
  const int64_t draws = std::min(params.r, candidates);
  if (draws > 0) {
    // Floyd's algorithm: a uniform draws-subset of [0, candidates) in O(draws log draws).
    SplitMix64 rng(params.seed, static_cast<uint64_t>(query_block), StreamSalt::bigbird);
    std::set<int64_t> chosen;
    for (int64_t t = candidates - draws; t < candidates; ++t) {
      const auto v = static_cast<int64_t>(rng.below(static_cast<uint64_t>(t) + 1));
      chosen.insert(chosen.count(v) ? t : v);
    }
    for (const int64_t c : chosen) {
      const int64_t block = c < below_size ? below.first + c : above.first + (c - below_size);
      blocks.emplace_back(block, block + 1);
    }
  }
  // Sort and merge overlapping or touching intervals, dropping empty ones.
  std::sort(blocks.begin(), blocks.end());
  std::vector<BlockInterval> merged;
  for (const auto& interval : blocks) {
    if (interval.first >= interval.second) continue;
    if (!merged.empty() && interval.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, interval.second);
    } else {
      merged.push_back(interval);
    }
  }
  return merged;
}

}  // namespace

template <typename Build>
auto bigbird_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, const BigBirdParams& params) {
  check_at_least("bigbird", "block", params.block, 1);
  check_at_least("bigbird", "w", params.w, 0);
  check_at_least("bigbird", "g", params.g, 0);
  check_at_least("bigbird", "r", params.r, 0);
  const int64_t offset = seqlen_k - seqlen_q;
  const int64_t num_block_cols = ceil_div_safe(std::max<int64_t>(seqlen_k, 0), params.block);
  // Rows of one query block are consecutive: compute its key blocks once per block and pass.
  bool cached = false;
  int64_t cached_block = 0;
  std::vector<BlockInterval> blocks;
  return build("bigbird", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t query_block = floor_div(i + offset, params.block);
    if (!cached || query_block != cached_block) {
      blocks = bigbird_blocks(query_block, num_block_cols, params);
      cached = true;
      cached_block = query_block;
    }
    for (const auto& [first, last] : blocks) {
      row.range(first * params.block, sat_mul(last, params.block));
    }
  });
}

template <typename Index>
CsrPattern<Index> bigbird_pattern(int64_t seqlen_q, int64_t seqlen_k, const BigBirdParams& params) {
  return bigbird_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, params);
}
std::optional<IntervalPattern> patterns_internal::bigbird_intervals(int64_t seqlen_q, int64_t seqlen_k, const BigBirdParams& params) {
  return bigbird_rows(IntervalRows{}, seqlen_q, seqlen_k, params);
}

template CsrPattern<int32_t> bigbird_pattern<int32_t>(int64_t, int64_t, const BigBirdParams&);
template CsrPattern<int64_t> bigbird_pattern<int64_t>(int64_t, int64_t, const BigBirdParams&);

}  // namespace sparse_formats
