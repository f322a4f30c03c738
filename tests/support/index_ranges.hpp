// Index ranges (spattn/shard.hpp) as the positions they hold, for the shard tests.
#pragma once

#include <spattn/shard.hpp>

#include <cstdint>
#include <vector>

namespace spattn::testing {

using Ranges = std::vector<IndexRange>;

// The positions of the ranges, concatenated in the order given.
inline std::vector<int64_t> positions_of(const Ranges& ranges) {
  std::vector<int64_t> positions;
  for (const IndexRange& r : ranges) {
    for (int64_t p = r.begin; p < r.end; ++p) positions.push_back(p);
  }
  return positions;
}

}  // namespace spattn::testing
