// The dense small_cache schedule's tiles (schedules/small_cache/small_cache.hpp runs them). A
// choice, so it lives in plan/; it keeps the schedules' namespace, as flash_tile_choice.hpp does.
#pragma once

#include "schedules/small_cache/small_cache.hpp"

#include <spattn/io.hpp>
#include <spattn/types.hpp>

#include <cstdint>

namespace spattn::schedules {

// Chooses every tile of the pass for fast memory of `cache_words` words: each product gets the
// tiles minimizing its predicted lines of `line_words` words, then its word reads
// (choose_matmul_tiles), t ~ sqrt(M) in the small-cache regime, with the sides along the arrays'
// rows in whole lines where that is cheaper. Throws InvalidArgument stating the minimum when
// cache_words is below it, when the shape has a negative size, or when line_words < 1.
SmallCacheTiles small_cache_tiles(const HeadShape& shape, int64_t cache_words, Pass pass,
                                  int64_t line_words = io::kDefaultLineWords);

}  // namespace spattn::schedules
