// What a Mask caches for the schedules: the mask re-blocked at each flash tiling it has run with,
// and the density-adaptive schedule's prepared structure (CSR copy + transpose). Built on first
// use under a lock, then shared read-only.
#pragma once

#include "schedules/flash_mask.hpp"
#include "schedules/sparse_small_cache.hpp"

#include <spattn/mask.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace spattn::detail {

struct MaskCache {
  std::shared_ptr<const schedules::FlashMask> flash(const Mask& mask, const schedules::FlashTiles& tiles,
                                                    Pass pass);
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache(const Mask& mask);

 private:
  using FlashKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
  std::mutex mutex_;
  std::map<FlashKey, std::shared_ptr<const schedules::FlashMask>> flash_;
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache_;
};

}  // namespace spattn::detail
