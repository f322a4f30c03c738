// Runs one group of the plan (plan/planned_run.hpp: one mask's heads, the algorithm, its tiles and
// prepared structures) on a team of workers: flash splits every head's tiles over the workers
// (schedules/flash/flash_heads.hpp); small_cache runs whole heads, one worker each, except with
// fewer heads than threads, where each head's row blocks are split over the whole team. Every
// worker has its own fast memory of M words and, when counting, its own ledger, merged into the
// caller's at the end. It chooses nothing: everything it runs with is in the group.
#pragma once

#include "plan/planned_run.hpp"
#include "schedules/common/head_problem.hpp"

#include <spattn/io.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <vector>

namespace spattn::api_detail {

class HeadRunner {
 public:
  // `group` of a plan whose run has fast memories of `cache_words` words, on `threads` workers.
  HeadRunner(const detail::PlannedGroup& group, int64_t cache_words, int threads)
      : group_(group), cache_words_(cache_words), threads_(threads) {}

  void run(const std::vector<schedules::HeadForward>& heads, io::Ledger* ledger) const;
  void run(const std::vector<schedules::HeadBackward>& heads, io::Ledger* ledger) const;

 private:
  template <typename Problem>
  void run_heads(const std::vector<Problem>& heads, io::Ledger* ledger) const;
  template <typename Memory, typename Problem>
  void run_small_cache(Memory& memory, const Problem& problem) const;

  const detail::PlannedGroup& group_;
  int64_t cache_words_;
  int threads_;
};

}  // namespace spattn::api_detail
