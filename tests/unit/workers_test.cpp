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
