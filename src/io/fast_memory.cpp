#include <spattn/io.hpp>

#include <sstream>

namespace spattn::io {

FastMemory::FastMemory(int64_t capacity_words, Ledger* ledger, std::string schedule)
    : capacity_(capacity_words), ledger_(ledger), schedule_(std::move(schedule)) {
  if (capacity_words <= 0) {
    fail(schedule_, ": fast memory capacity M = ", capacity_words, " words must be positive");
  }
}

FastMemory::~FastMemory() {
  // Buffers must not outlive their fast memory; a schedule allocates and frees them in its scope.
  assert(resident_ == 0);
}

void throw_capacity_exceeded(const std::string& schedule, const char* what, int64_t words,
                             int64_t resident, int64_t capacity) {
  std::ostringstream message;
  message << schedule << ": allocating " << what << " (" << words << " words) with " << resident
          << " words resident would hold " << resident + words
          << " words in fast memory, more than M = " << capacity;
  throw RuntimeError(message.str());
}

}  // namespace spattn::io
