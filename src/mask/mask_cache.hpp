// What a Mask caches: the structures the schedules walk (the mask re-blocked at each flash tiling
// it runs with; the density-adaptive small_cache's counts, and its CSR copy + transpose only once
// small_cache runs), and a memo in which the planner keeps what it chose and predicted for the
// mask (tiles, costs), so repeated calls with the same shapes (every layer, every step) neither
// choose nor predict again. Built on first use under a lock, then shared read-only.
//
// The memo stores values of the planner's types without knowing them: each entry is keyed by
// its type and by the numbers it was computed for, so the mask stays below the planner.
#pragma once

#include "schedules/flash/flash_mask.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/mask.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <typeindex>
#include <typeinfo>
#include <utility>

namespace spattn::detail {

// f(view) over an element mask's own CSR: its int32 arrays where it holds them (Mask::csr32()),
// else csr() (int64; built on the first call for the other forms). f returns one type for both.
template <typename F>
auto with_element_csr(const Mask& mask, F&& f) {
  if (const auto csr32 = mask.csr32()) return f(*csr32);
  return f(mask.csr());
}

struct MaskCache {
  std::shared_ptr<const schedules::FlashMask> flash(const Mask& mask, const schedules::FlashTiles& tiles,
                                                    Pass pass);
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache(const Mask& mask);
  // What small_cache's tile choice and prediction read, from the mask's CSR alone (no copy, no
  // transpose): the planner uses this, so the structure above is built only when small_cache runs.
  std::shared_ptr<const schedules::SparseMaskCounts> small_cache_counts(const Mask& mask);
  // The transpose of the mask's row intervals (sparse_formats::transpose; a block mask's from its
  // transposed blocks): the backward's key lists at every tiling read it. nullptr for the full and
  // element forms.
  std::shared_ptr<const sparse_formats::IntervalPattern> transposed_intervals(const Mask& mask);

  // The numbers a memo entry was computed for (the planner's: head_dim, head_dim_v, M, pass,
  // objective, line size).
  using MemoNumbers = std::array<int64_t, 6>;

  // The Value remembered for `numbers`, or compute()'s, remembered. compute() runs outside the
  // lock (other shapes' calls go on); two racing calls may both compute, and the first stored wins.
  template <typename Value, typename Compute>
  Value remember(const MemoNumbers& numbers, Compute&& compute) {
    const MemoKey key{std::type_index(typeid(Value)), numbers};
    if (auto found = find_memo(key)) return *static_cast<const Value*>(found.get());
    std::shared_ptr<const void> stored = store_memo(key, std::make_shared<const Value>(compute()));
    return *static_cast<const Value*>(stored.get());
  }

 private:
  using MemoKey = std::pair<std::type_index, MemoNumbers>;
  std::shared_ptr<const void> find_memo(const MemoKey& key);
  std::shared_ptr<const void> store_memo(const MemoKey& key, std::shared_ptr<const void> value);

  using FlashKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
  std::mutex mutex_;
  std::map<FlashKey, std::shared_ptr<const schedules::FlashMask>> flash_;
  std::shared_ptr<const schedules::SparseSmallCacheMask> small_cache_;
  std::shared_ptr<const schedules::SparseMaskCounts> small_cache_counts_;
  std::shared_ptr<const sparse_formats::IntervalPattern> transposed_intervals_;
  std::map<MemoKey, std::shared_ptr<const void>> memo_;
};

}  // namespace spattn::detail
