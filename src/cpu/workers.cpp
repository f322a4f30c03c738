#include "cpu/workers.hpp"

#include <spattn/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <queue>
#include <utility>
#include <system_error>
#include <thread>
#include <vector>

namespace spattn::cpu {

namespace {

// Threads kept between calls, so that a call does not pay for starting its workers (about 26 us a
// thread on the dev machine, several times per fwd + bwd: 5 to 10 % of a millisecond call). They
// sleep on a condition variable between jobs (no spinning: the cores stay free for the caller's
// other threads, torch's among them). One job at a time: a call that finds the pool busy (a
// concurrent call, or run_workers inside a worker's body) starts threads of its own, as every call
// did before; results do not depend on which threads run a worker's items.
class WorkerPool {
 public:
  // The most threads the pool keeps; a call with more workers starts its own.
  static constexpr int kMaxPoolThreads = 255;

  // The process's pool; a child of fork() (which has none of its parent's threads) gets a new
  // one, and the parent's, whose state it may have copied mid-job, is never touched again.
  static WorkerPool& instance() {
    static std::mutex guard;
    static WorkerPool* pool = nullptr;
    std::lock_guard<std::mutex> lock(guard);
    if (pool == nullptr || pool->owner_ != getpid()) pool = new WorkerPool();  // kept to the end
    return *pool;
  }

  // Runs guarded(1) .. guarded(workers - 1) on pool threads and guarded(0) on the caller; false,
  // with nothing run, when the pool is busy or keeps fewer threads than the call needs.
  bool try_run(int workers, const std::function<void(int)>& guarded) {
    if (workers - 1 > kMaxPoolThreads) return false;
    std::unique_lock<std::mutex> job(busy_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    const int helpers = grow(workers - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &guarded;
      active_ = helpers;
      pending_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    guarded(0);
    for (int worker = helpers + 1; worker < workers; ++worker) guarded(worker);  // threads refused
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    return true;
  }

 private:
  WorkerPool() : owner_(getpid()) {}

  // Starts threads until `helpers` exist or the system refuses one; returns how many exist.
  int grow(int helpers) {
    try {
      for (; threads_ < helpers; ++threads_) {
        const int index = threads_;
        std::thread([this, index] { serve(index); }).detach();  // the pool outlives them; exit() ends them
      }
    } catch (const std::system_error&) {
    }
    return std::min(helpers, threads_);
  }

  // Thread `index` runs worker index + 1 of every job with more than index + 1 workers.
  void serve(int index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= active_) continue;
      const std::function<void(int)>* body = body_;
      lock.unlock();
      (*body)(index + 1);
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  const pid_t owner_;
  std::mutex busy_;   // held by the call whose job the pool runs
  std::mutex mutex_;  // guards the job below
  std::condition_variable wake_, done_;
  const std::function<void(int)>* body_ = nullptr;
  int active_ = 0;   // pool threads in the current job
  int pending_ = 0;  // of them, those not finished
  uint64_t generation_ = 0;
  int threads_ = 0;  // started, each serving for good
};

// Starts workers 1 .. workers - 1 on threads of their own, runs worker 0 on the caller, joins.
void run_on_new_threads(int workers, const std::function<void(int)>& guarded) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(workers - 1));
  int spawned = 1;
  try {
    for (; spawned < workers; ++spawned) threads.emplace_back(guarded, spawned);
  } catch (const std::system_error&) {
    // No more threads to be had: the calling thread runs the rest (the split, and so every
    // result, stays the same).
  }
  guarded(0);
  for (int worker = spawned; worker < workers; ++worker) guarded(worker);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace

void run_workers(int workers, const std::function<void(int)>& body) {
  if (workers <= 1) {
    body(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  const std::function<void(int)> guarded = [&](int worker) {
    try {
      body(worker);
    } catch (...) {
      errors[static_cast<size_t>(worker)] = std::current_exception();
    }
  };
  if (!WorkerPool::instance().try_run(workers, guarded)) run_on_new_threads(workers, guarded);
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

std::vector<std::vector<int64_t>> split_by_cost(const std::vector<int64_t>& costs, int workers) {
  const int count = std::max(workers, 1);
  std::vector<std::vector<int64_t>> split(static_cast<size_t>(count));
  std::vector<int64_t> order(costs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return costs[static_cast<size_t>(a)] > costs[static_cast<size_t>(b)];
  });
  // The workers by (load, index): the least loaded, lowest first, on top.
  using Load = std::pair<int64_t, int>;
  std::priority_queue<Load, std::vector<Load>, std::greater<Load>> loads;
  for (int worker = 0; worker < count; ++worker) loads.emplace(0, worker);
  for (const int64_t item : order) {
    const Load least = loads.top();
    loads.pop();
    split[static_cast<size_t>(least.second)].push_back(item);
    loads.emplace(least.first + costs[static_cast<size_t>(item)], least.second);
  }
  for (std::vector<int64_t>& items : split) std::sort(items.begin(), items.end());
  return split;
}

WorkerMemories::WorkerMemories(int workers, int64_t cache_words, io::Ledger* ledger,
                               const std::string& schedule)
    : ledger_(ledger) {
  for (int worker = 0; worker < std::max(workers, 1); ++worker) {
    io::Ledger* own = nullptr;
    if (ledger != nullptr) {
      ledgers_.push_back(std::make_unique<io::Ledger>(ledger->line_words()));
      own = ledgers_.back().get();
    }
    memories_.push_back(std::make_unique<io::FastMemory>(cache_words, own, schedule));
  }
}

void WorkerMemories::merge_ledgers() {
  if (ledger_ == nullptr) return;
  for (const auto& own : ledgers_) *ledger_ += *own;
}

}  // namespace spattn::cpu
