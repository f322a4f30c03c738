// The tiled product's tiles (schedules/common/tiled_matmul.hpp runs them), searched over the
// schedule's exact predictions. A choice, so it lives in plan/; it keeps the schedules' namespace,
// as flash_tile_choice.hpp does, since it speaks the schedule's types.
#pragma once

#include "schedules/common/tiled_matmul.hpp"

#include <cstdint>

namespace spattn::schedules {

// The tiles minimizing the predicted lines moved (reads and writes, lines of `line_words` words
// with the operands laid out as `layout` says), then the predicted word reads, among all that fit
// in `cache_words` together with `row_words` words per tile row kept by hooks
// (tile_m * (tile_n + tile_k + row_words) + tile_k * tile_n <= cache_words). With line_words 1
// lines are words, so this is the tiles minimizing the reads. For a square-ish product with M well below a * b this is
// tile_m ~ tile_n ~ sqrt(M); when k is short (M > k^2 / 4) it keeps the A panel resident; when b
// is narrow the tile is b wide and about as tall as fits. Tiles are split evenly (the same numbers
// of blocks, so the same reads, with the memory left over given to the chunk), and ties go to the
// longer chunk, then the larger tile: the kernels keep outputs in registers over a chunk. Throws
// InvalidArgument naming the minimum when cache_words is below it.
// With line_words > 1 the tiles whose sides are the widest that fit rounded down to a multiple of
// line_words are candidates too, so that a tile's rows are whole lines where that is cheaper, and
// every candidate whose chunk is not whole lines is weighed with and without a line carry: the
// carry's words in what the tiles leave of cache_words plus `carry_room` more (the caller's
// headroom for the lines its copies read, small_cache.hpp). So are, for each height, the widest
// tiles that leave room for a carry at chunks of half a line, when at least a line wide. With
// small_cache's split (cache_words = carry_room = M / 2) the choice then moves the fewest lines
// of all tiles that fit from the tall cache on (M >= 4 line_words^2; tiled_matmul_lines_test
// searches them all); below it the fewest can be narrower than a line, which the kernels run
// slower, and they are left out.
MatmulTiles choose_matmul_tiles(int64_t a, int64_t k, int64_t b, int64_t cache_words,
                                int64_t row_words = 0, MatmulLayout layout = {},
                                int64_t line_words = 1, int64_t carry_room = 0);

}  // namespace spattn::schedules
