// spattn_bench --memory: fwd+bwd at long sequences over a mask (a sliding window by default, any
// PATTERN-SPEC with --memory-mask), reporting the mask's form and bytes and the process's
// peak resident set (getrusage ru_maxrss). The cases run in increasing n in one process, so each
// peak is the largest so far: the largest case's own peak.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace spattn::bench {

struct MemorySettings {
  std::vector<int64_t> seqlens = {65536, 131072};
  int64_t head_dim = 64;
  int64_t window = 256;
  std::string mask_spec;  // the mask; empty: sliding_window:w=<window>
  int threads = 0;
  int64_t cache_words = 0;
  int64_t line_words = 0;  // 0 = 16
  // Run the flash schedule itself (the tile lists built once, no planner) instead of the public
  // API: what the schedule needs, apart from what the API caches for planning.
  bool schedule_only = false;
};

void run_memory_mode(std::ostream& out, const MemorySettings& settings);

}  // namespace spattn::bench
