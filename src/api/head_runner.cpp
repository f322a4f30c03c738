// One mask's head problems on a team of workers (head_runner.hpp).
#include "api/head_runner.hpp"

#include "cpu/workers.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

namespace spattn::api_detail {

void HeadRunner::run(const std::vector<schedules::HeadForward>& heads, io::Ledger* ledger) const {
  run_heads(heads, ledger);
}

void HeadRunner::run(const std::vector<schedules::HeadBackward>& heads, io::Ledger* ledger) const {
  run_heads(heads, ledger);
}

template <typename Problem>
void HeadRunner::run_heads(const std::vector<Problem>& heads, io::Ledger* ledger) const {
  constexpr bool forward = std::is_same_v<Problem, schedules::HeadForward>;
  const std::string name = std::string(algorithm_name(group_.algorithm)) + (group_.masked() ? " (sparse)" : "") +
                           (forward ? " forward" : " backward");
  if (group_.algorithm == Algorithm::flash) {
    const schedules::FlashTeam team{threads_, cache_words_, ledger, name};
    if constexpr (forward) {
      schedules::flash_forward_heads(team, heads, group_.flash_tiles, group_.flash_mask.get());
    } else {
      schedules::flash_backward_heads(team, heads, group_.flash_tiles, group_.flash_mask.get());
    }
    return;
  }
  const auto num_heads = static_cast<int64_t>(heads.size());
  if (num_heads == 0) return;
  // Fewer heads than threads: whole heads would leave threads idle, so each head's row blocks are
  // split over the whole team, heads one after another (the same bits as one worker:
  // small_cache.hpp, sparse_small_cache.hpp).
  if (num_heads < threads_) {
    cpu::WorkerMemories memories(threads_, cache_words_, ledger, name);
    for (const Problem& head : heads) run_small_cache(memories, head);
    memories.merge_ledgers();
    return;
  }
  // Otherwise whole heads, worker w taking heads w, w + W, ...
  const int workers = static_cast<int>(std::clamp<int64_t>(num_heads, 1, threads_));
  cpu::WorkerMemories memories(workers, cache_words_, ledger, name);
  cpu::run_workers(workers, [&](int worker) {
    cpu::for_each_item(worker, workers, num_heads, [&](int64_t head) {
      run_small_cache(memories[worker], heads[static_cast<size_t>(head)]);
    });
  });
  memories.merge_ledgers();
}

// One head of small_cache on one fast memory (io::FastMemory) or on a team's (cpu::WorkerMemories):
// the schedules have an overload for each.
template <typename Memory, typename Problem>
void HeadRunner::run_small_cache(Memory& memory, const Problem& problem) const {
  if (group_.sparse_small_cache_mask) {
    if constexpr (std::is_same_v<Problem, schedules::HeadForward>) {
      schedules::sparse_small_cache_forward(memory, problem, *group_.sparse_small_cache_mask,
                                            group_.sparse_small_cache_tiles);
    } else {
      schedules::sparse_small_cache_backward(memory, problem, *group_.sparse_small_cache_mask,
                                             group_.sparse_small_cache_tiles);
    }
  } else if constexpr (std::is_same_v<Problem, schedules::HeadForward>) {
    schedules::small_cache_forward(memory, problem, group_.small_cache_tiles);
  } else {
    schedules::small_cache_backward(memory, problem, group_.small_cache_tiles);
  }
}

}  // namespace spattn::api_detail
