// cpu::run_workers (src/cpu/workers.hpp): every worker index runs exactly once per call, on a pool
// of threads kept between calls; a busy pool (a call inside a worker, or from another thread)
// starts threads of its own; the lowest-numbered worker's exception is rethrown and the pool runs
// the next call; a child of fork() runs workers too (the parent's threads are not in it).
#include "cpu/workers.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using spattn::cpu::run_workers;

namespace {

// Calls of a worker body this thread has run: a new thread starts at 0.
thread_local int served = 0;

// Runs `workers` workers that record their index and thread; true when each index ran once.
// `most_served`: the most bodies a thread other than the caller had run by the end.
bool each_worker_runs_once(int workers, int* most_served = nullptr) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(workers));
  std::vector<std::thread::id> ids(static_cast<size_t>(workers));
  std::vector<int> served_by(static_cast<size_t>(workers));
  run_workers(workers, [&](int worker) {
    runs[static_cast<size_t>(worker)]++;
    ids[static_cast<size_t>(worker)] = std::this_thread::get_id();
    served_by[static_cast<size_t>(worker)] = ++served;
  });
  for (const auto& count : runs) {
    if (count != 1) return false;
  }
  if (ids[0] != std::this_thread::get_id()) return false;  // worker 0 is the caller
  if (most_served != nullptr) {
    for (int worker = 1; worker < workers; ++worker) {
      *most_served = std::max(*most_served, served_by[static_cast<size_t>(worker)]);
    }
  }
  return true;
}

}  // namespace

TEST(Workers, EveryWorkerRunsOncePerCallAndThePoolKeepsItsThreads) {
  int most_served = 0;
  for (int round = 0; round < 50; ++round) {
    for (const int workers : {1, 2, 3, 8, 2}) ASSERT_TRUE(each_worker_runs_once(workers, &most_served)) << workers;
  }
  // Worker 1 of each of the 200 calls with workers ran on one pool thread, not on a new one each.
  EXPECT_GE(most_served, 200);
}

TEST(Workers, TheLowestWorkersExceptionIsRethrownAndThePoolRunsTheNextCall) {
  for (int round = 0; round < 3; ++round) {
    try {
      run_workers(4, [](int worker) {
        if (worker >= 2) throw std::runtime_error("worker " + std::to_string(worker));
      });
      FAIL() << "nothing thrown";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "worker 2");
    }
    EXPECT_TRUE(each_worker_runs_once(4));
  }
}

TEST(Workers, CallsInsideWorkersAndFromOtherThreadsRunOnThreadsOfTheirOwn) {
  std::atomic<int> inner_ok{0};
  run_workers(3, [&](int) {
    if (each_worker_runs_once(3)) inner_ok++;
  });
  EXPECT_EQ(inner_ok, 3);
  std::atomic<int> ok{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 20; ++round) {
        if (each_worker_runs_once(2 + round % 3)) ok++;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  EXPECT_EQ(ok, 80);
  // More workers than the pool keeps: threads of their own, then the pool again.
  EXPECT_TRUE(each_worker_runs_once(300));
  EXPECT_TRUE(each_worker_runs_once(3));
}

TEST(Workers, AChildOfForkRunsWorkers) {
  ASSERT_TRUE(each_worker_runs_once(3));  // the parent's pool has threads now
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    alarm(20);  // a child waiting on the parent's threads would hang: end it instead
    _exit(each_worker_runs_once(3) && each_worker_runs_once(2) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child did not exit (signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
                                 << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(each_worker_runs_once(3));
}

namespace {

// Every item in exactly one worker's list, each list ascending; the loads' spread.
int64_t checked_spread(const std::vector<std::vector<int64_t>>& split, const std::vector<int64_t>& costs) {
  std::vector<int> seen(costs.size(), 0);
  int64_t most = 0, least = -1;
  for (const std::vector<int64_t>& items : split) {
    EXPECT_TRUE(std::is_sorted(items.begin(), items.end()));
    int64_t load = 0;
    for (const int64_t item : items) {
      seen[static_cast<size_t>(item)]++;
      load += costs[static_cast<size_t>(item)];
    }
    most = std::max(most, load);
    least = least < 0 ? load : std::min(least, load);
  }
  for (const int count : seen) EXPECT_EQ(count, 1);
  return most - least;
}

}  // namespace

TEST(Workers, SplitByCostBalancesTheWorkNotTheCount) {
  // A causal mask's query tiles cost 1, 2, ..., 8: round-robin gives 16 and 20, the split 18 and 18.
  const std::vector<int64_t> causal = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto split = spattn::cpu::split_by_cost(causal, 2);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(checked_spread(split, causal), 0);
  EXPECT_EQ(split[0], (std::vector<int64_t>{0, 3, 4, 7}));  // 8, 5, 4, 1: the rule's own order
  // Alike items go round-robin (a window's tiles), the short last tile to the lighter worker.
  const std::vector<int64_t> alike = {4, 4, 4, 4, 4, 2};
  const auto even = spattn::cpu::split_by_cost(alike, 2);
  EXPECT_EQ(even[0], (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(even[1], (std::vector<int64_t>{1, 3, 5}));
  // Any costs: the loads differ by at most the largest item, every worker count, repeatably.
  for (const int workers : {1, 2, 3, 7, 40}) {
    std::vector<int64_t> costs;
    uint32_t state = 12345u + static_cast<uint32_t>(workers);
    for (int i = 0; i < 97; ++i) {
      state = state * 1664525u + 1013904223u;
      costs.push_back(static_cast<int64_t>(state >> 20));
    }
    const auto first = spattn::cpu::split_by_cost(costs, workers);
    ASSERT_EQ(first.size(), static_cast<size_t>(workers));
    EXPECT_LE(checked_spread(first, costs), *std::max_element(costs.begin(), costs.end())) << workers;
    EXPECT_EQ(spattn::cpu::split_by_cost(costs, workers), first);
  }
  EXPECT_TRUE(spattn::cpu::split_by_cost({}, 3)[2].empty());
}
