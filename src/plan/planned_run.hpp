// The typed part of a Plan: what runs. The planner fills it (and nothing else does); the CPU
// runner and the CSR-input path read it and choose nothing.
//
// A call's query heads are split into groups by mask (heads given copies of one Mask share a
// group). Every group runs the plan's one algorithm with its own tiles, chosen for its mask, and
// the prepared mask structures those tiles walk (kept in the mask's cache, so a preview and the
// run of the same call hold the very same structures).
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

namespace spattn::detail {

struct PlannedGroup {
  Mask mask;
  std::vector<int64_t> heads;              // query heads (the same in every batch entry)
  Algorithm algorithm = Algorithm::flash;  // flash or small_cache (the plan's)

  // flash: the tiles, and over a mask other than full the mask re-blocked at them (else null).
  schedules::FlashTiles flash_tiles;
  std::shared_ptr<const schedules::FlashMask> flash_mask;
  // small_cache over a full mask: the dense schedule's tiles.
  schedules::SmallCacheTiles small_cache_tiles;
  // small_cache over any other mask: the density-adaptive schedule's tiles and prepared structure.
  schedules::SparseSmallCacheTiles sparse_small_cache_tiles;
  std::shared_ptr<const schedules::SparseSmallCacheMask> sparse_small_cache_mask;

  bool masked() const { return !mask.is_full(); }
};

// The tile of one grouped-query sum (api/kv_reduction.hpp runs it): rows x cols of a kv head's
// gradient, held twice (the sum and one partial).
struct KvSumTile {
  int64_t rows = 0;
  int64_t cols = 0;
  friend bool operator==(const KvSumTile& a, const KvSumTile& b) { return a.rows == b.rows && a.cols == b.cols; }
  friend std::ostream& operator<<(std::ostream& out, const KvSumTile& tile) {
    return out << tile.rows << " x " << tile.cols;
  }
};

struct PlannedRun {
  Pass pass = Pass::forward;  // (M, every worker's fast memory, is the Plan's cache_words)
  std::vector<PlannedGroup> groups;
  // A grouped-query backward's dK and dV sums (0 x 0 when the call has none).
  KvSumTile dk_sum, dv_sum;
};

// Equal when every group has the same heads, algorithm and tiles and walks the same prepared
// structures (the same objects: the mask's cache shares them).
bool operator==(const PlannedGroup& a, const PlannedGroup& b);
bool operator==(const PlannedRun& a, const PlannedRun& b);

}  // namespace spattn::detail
