// One mask's head problems on a team of workers (head_runner.hpp).
#include "api/head_runner.hpp"

#include "mask/mask_cache.hpp"
#include "cpu/workers.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "plan/flash_tile_choice.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

namespace spattn::api_detail {

HeadRunner::HeadRunner(Algorithm algorithm, const bounds::DenseShape& shape, const Mask& mask,
                       int64_t cache_words, Pass pass, int threads, PlanObjective objective)
    : algorithm_(algorithm), mask_(mask), cache_words_(cache_words), threads_(threads) {
  const schedules::HeadShape head{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v};
  const bool sparse = !mask.is_full();
  if (algorithm == Algorithm::flash) {
    // The tiles the planner priced (flash_tile_choice.hpp, kept in the mask), so the count equals
    // the prediction.
    if (sparse) {
      flash_tiles_ = mask.cache().flash_tiles(mask, head, cache_words, pass, objective);
      flash_mask_ = mask.cache().flash(mask, flash_tiles_, pass);
    } else {
      flash_tiles_ = schedules::flash_tiles(head, cache_words, pass);
    }
  } else if (sparse) {
    sparse_mask_ = mask.cache().small_cache(mask);
    // The tiles the planner priced (from the mask's counts), so the count equals the prediction.
    sparse_tiles_ = mask.cache().small_cache_tiles(mask, head, cache_words, pass, objective);
  } else {
    small_tiles_ = schedules::small_cache_tiles(head, cache_words, pass);
  }
}

void HeadRunner::run(const std::vector<schedules::HeadForward>& heads, io::Ledger* ledger) const {
  run_heads(heads, ledger);
}

void HeadRunner::run(const std::vector<schedules::HeadBackward>& heads, io::Ledger* ledger) const {
  run_heads(heads, ledger);
}

template <typename Problem>
void HeadRunner::run_heads(const std::vector<Problem>& heads, io::Ledger* ledger) const {
  constexpr bool forward = std::is_same_v<Problem, schedules::HeadForward>;
  const std::string name = std::string(algorithm_name(algorithm_)) + (mask_.is_full() ? "" : " (sparse)") +
                           (forward ? " forward" : " backward");
  if (algorithm_ == Algorithm::flash) {
    const schedules::FlashTeam team{threads_, cache_words_, ledger, name};
    if constexpr (forward) {
      schedules::flash_forward_heads(team, heads, flash_tiles_, flash_mask_.get());
    } else {
      schedules::flash_backward_heads(team, heads, flash_tiles_, flash_mask_.get());
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
    for (const Problem& head : heads) {
      if constexpr (forward) {
        if (sparse_mask_) {
          schedules::sparse_small_cache_forward(memories, head, *sparse_mask_, sparse_tiles_);
        } else {
          schedules::small_cache_forward(memories, head, small_tiles_);
        }
      } else {
        if (sparse_mask_) {
          schedules::sparse_small_cache_backward(memories, head, *sparse_mask_, sparse_tiles_);
        } else {
          schedules::small_cache_backward(memories, head, small_tiles_);
        }
      }
    }
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

template <typename Problem>
void HeadRunner::run_small_cache(io::FastMemory& fast, const Problem& problem) const {
  constexpr bool forward = std::is_same_v<Problem, schedules::HeadForward>;
  if (sparse_mask_) {
    if constexpr (forward) {
      schedules::sparse_small_cache_forward(fast, problem, *sparse_mask_, sparse_tiles_);
    } else {
      schedules::sparse_small_cache_backward(fast, problem, *sparse_mask_, sparse_tiles_);
    }
  } else {
    if constexpr (forward) {
      schedules::small_cache_forward(fast, problem, small_tiles_);
    } else {
      schedules::small_cache_backward(fast, problem, small_tiles_);
    }
  }
}

}  // namespace spattn::api_detail
