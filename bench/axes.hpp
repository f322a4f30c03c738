// The axes of spattn sweep (and the cache sizes of spattn run) as written on the command line:
// comma-separated items, each a number or an inclusive range
//   A:B:xF   A, A*F, A*F^2, ... up to B   (multiplicative step, F >= 2)
//   A:B:+S   A, A+S, A+2S, ... up to B    (additive step, S >= 1)
//   A:B      A, A+1, ..., B
// e.g. --cache-words 64:65536:x2, --n 1024,4096, --d 32:128:+32. Mistakes are UsageErrors that name
// the flag and the item ("--cache-words: range '64:32:x2' is empty: start 64 > end 32").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::cli {

// At most this many values in one axis (a typo such as 1:1000000000 must not allocate gigabytes).
inline constexpr int64_t kMaxAxisValues = 4096;

// Every value must be >= minimum.
std::vector<int64_t> parse_int_axis(const std::string& text, const std::string& flag, int64_t minimum);

// A comma-separated list of names, each one of `allowed` ("--algorithm: 'flsh' is not one of auto,
// flash, small_cache").
std::vector<std::string> parse_name_axis(const std::string& text, const std::string& flag,
                                         const std::vector<std::string>& allowed);

}  // namespace spattn::cli
