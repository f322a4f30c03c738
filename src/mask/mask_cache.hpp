// What a Mask caches for the schedules: the mask re-blocked at each flash tiling it has been
// planned or run with, the density-adaptive schedule's counts (for planning) and its prepared
// structure (CSR copy + transpose, only once small_cache runs). Built on first use under a lock,
// then shared read-only.
#pragma once

#include "schedules/flash/flash_mask.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

namespace spattn::detail {

struct MaskCache {
  std::shared_ptr<const schedules::FlashMask> flash(const Mask& mask, const schedules::FlashTiles& tiles,
                                                    Pass pass);
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache(const Mask& mask);
  // What small_cache's tile choice and prediction read, from the mask's CSR alone (no copy, no
  // transpose): the planner uses this, so the structure above is built only when small_cache runs.
  std::shared_ptr<const schedules::SparseMaskCounts> small_cache_counts(const Mask& mask);

  // The density-adaptive schedule's tiles for (head_dim, head_dim_v, M, pass, objective), chosen
  // from the counts above once and shared by the planner and the runners, which must agree on
  // them for the count to equal the prediction. Choosing is not cheap: each candidate row block's
  // distinct-column count walks the entries of an unstructured mask (O(nnz), about 30 to 45
  // distinct blocks per pass, each count kept in the counts object), so a first call with a new
  // shape can take about as long as the run itself (uniform random masks at n 4096); every later
  // call finds the tiles here.
  schedules::SparseSmallCacheTiles small_cache_tiles(const Mask& mask, const schedules::HeadShape& shape,
                                                     int64_t cache_words, Pass pass, PlanObjective objective);

  // Block-sparse flash's tiles for (head_dim, head_dim_v, M, pass, objective):
  // schedules::masked_flash_tiles, chosen once (the choice reads every row's span: O(seqlen_q) per
  // candidate, a tenth of a millisecond-long call at n 1024) and shared by the planner and the
  // runners.
  schedules::FlashTiles flash_tiles(const Mask& mask, const schedules::HeadShape& shape, int64_t cache_words,
                                    Pass pass, PlanObjective objective);

  // The planner's per-head predictions for (head_dim, head_dim_v, M, pass), so that repeated
  // calls with the same shapes (every layer, every step) do not re-predict.
  using CostKey = std::tuple<int64_t, int64_t, int64_t, int, int>;  // d, d_v, M, pass, tile objective
  using Costs = std::pair<AlgorithmCost, AlgorithmCost>;  // flash, small_cache
  bool find_costs(const CostKey& key, Costs& costs);
  void store_costs(const CostKey& key, const Costs& costs);

 private:
  using FlashKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
  std::mutex mutex_;
  std::map<FlashKey, std::shared_ptr<const schedules::FlashMask>> flash_;
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache_;
  std::shared_ptr<const schedules::SparseMaskCounts> small_cache_counts_;
  using TilesKey = std::tuple<int64_t, int64_t, int64_t, int, int>;  // d, d_v, M, pass, objective
  std::map<TilesKey, schedules::SparseSmallCacheTiles> small_cache_tiles_;
  std::map<TilesKey, schedules::FlashTiles> flash_tiles_;
  std::map<CostKey, Costs> costs_;

  // map[key], chosen by choose() outside the lock the first time (small_cache_tiles, flash_tiles).
  template <typename Map, typename Choose>
  typename Map::mapped_type find_or_choose(Map& map, const typename Map::key_type& key, Choose&& choose);
};

}  // namespace spattn::detail
