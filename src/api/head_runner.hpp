// Runs one mask's head problems with the planned algorithm on a team of workers: flash splits
// every head's tiles over the workers (schedules/flash/flash_heads.hpp), small_cache runs whole heads,
// one worker each, except with fewer heads than threads, where each head's row blocks are split
// over the whole team (schedules/small_cache/small_cache.hpp, schedules/sparse_small_cache/sparse_small_cache.hpp). A full mask
// takes the dense schedules, any other the block-sparse flash or the density-adaptive
// small_cache. Every worker has its own fast memory of M words and, when counting, its own
// ledger, merged into the caller's at the end. The structures a schedule walks (the re-blocked mask, the small_cache transpose) are
// taken from the mask's cache here, so they are built only for the algorithm that runs.
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/head_problem.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/io.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <memory>
#include <vector>

namespace spattn::api_detail {

class HeadRunner {
 public:
  // `algorithm` (flash or small_cache) for problems of `shape` over `mask`.
  // `objective`: how the tiles were chosen for the mask (the plan's; spattn/plan.hpp).
  HeadRunner(Algorithm algorithm, const bounds::DenseShape& shape, const Mask& mask,
             int64_t cache_words, Pass pass, int threads, PlanObjective objective);

  void run(const std::vector<schedules::HeadForward>& heads, io::Ledger* ledger) const;
  void run(const std::vector<schedules::HeadBackward>& heads, io::Ledger* ledger) const;

 private:
  template <typename Problem>
  void run_heads(const std::vector<Problem>& heads, io::Ledger* ledger) const;
  template <typename Problem>
  void run_small_cache(io::FastMemory& fast, const Problem& problem) const;

  Algorithm algorithm_;
  Mask mask_;
  int64_t cache_words_;
  int threads_;
  schedules::FlashTiles flash_tiles_;
  std::shared_ptr<const schedules::FlashMask> flash_mask_;
  schedules::SmallCacheTiles small_tiles_;
  std::shared_ptr<const schedules::SparseSmallCacheMask> sparse_mask_;
  schedules::SparseSmallCacheTiles sparse_tiles_;
};

}  // namespace spattn::api_detail
