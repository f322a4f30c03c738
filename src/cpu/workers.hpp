// Native execution on several cores: a team of worker threads over independent work, each worker
// with its own fast memory of M words (the I/O model's "M per core") and, when counting, its own
// ledger, merged into the caller's at the end.
//
// Work is split statically (round-robin by item index), never by who finishes first, so which
// worker computes an output tile never changes its order of operations: results are bit-identical
// for every thread count and across runs.
#pragma once

#include <spattn/io.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace spattn::cpu {

// Runs body(worker) for worker = 0 .. workers - 1, worker 0 on the calling thread and the others
// on the process's pool of threads kept between calls (on threads of their own when the pool runs
// another call's workers or keeps fewer threads than asked: 255); returns when all have finished.
// If any throw, rethrows the exception of the lowest-numbered worker that threw (after all have
// stopped).
void run_workers(int workers, const std::function<void(int)>& body);

// The items of `worker` among `workers`: item = worker, worker + workers, ... < num_items.
template <typename Body>
void for_each_item(int worker, int workers, int64_t num_items, Body&& body) {
  for (int64_t item = worker; item < num_items; item += workers) body(item);
}

// A static split of items over `workers` balanced by their costs (>= 0), for work whose items
// differ in size (a causal mask's query tiles, a banded mask's edges): the longest-processing-time
// rule, items by decreasing cost (ties by index) each to the worker with the least cost so far
// (ties to the lowest worker), each worker's items returned in increasing order. The largest load
// exceeds the smallest by at most the largest item's cost. It depends on the costs and the worker
// count only, and which worker computes an item does not change its bits.
std::vector<std::vector<int64_t>> split_by_cost(const std::vector<int64_t>& costs, int workers);

// One fast memory per worker, all of capacity cache_words, each counting into a ledger of its own
// when `ledger` is set (native mode otherwise).
class WorkerMemories {
 public:
  WorkerMemories(int workers, int64_t cache_words, io::Ledger* ledger, const std::string& schedule);
  int size() const { return static_cast<int>(memories_.size()); }
  io::FastMemory& operator[](int worker) { return *memories_[static_cast<size_t>(worker)]; }
  // Adds every worker's counts to the caller's ledger (reads and writes summed, the peak resident
  // words the largest worker's: each worker's fast memory is separate). Nothing when native.
  void merge_ledgers();

 private:
  io::Ledger* ledger_;
  std::vector<std::unique_ptr<io::Ledger>> ledgers_;
  std::vector<std::unique_ptr<io::FastMemory>> memories_;
};

}  // namespace spattn::cpu
