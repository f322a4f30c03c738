#include "cpu/workers.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

namespace spattn::cpu {

void run_workers(int workers, const std::function<void(int)>& body) {
  if (workers <= 1) {
    body(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<size_t>(workers));
  auto guarded = [&](int worker) {
    try {
      body(worker);
    } catch (...) {
      errors[static_cast<size_t>(worker)] = std::current_exception();
    }
  };
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
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
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
