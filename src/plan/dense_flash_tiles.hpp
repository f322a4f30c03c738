// The dense flash schedule's tiles (schedules/flash/flash.hpp runs them): the planner's rule for
// every flash run, and its per-nest form with a limited outer tile, which the mask-aware choice
// (flash_tile_choice.hpp) searches over. A choice, so it lives in plan/; it keeps the schedules'
// namespace, as flash_tile_choice.hpp does, since it speaks the schedule's types.
#pragma once

#include "schedules/flash/flash.hpp"

#include <spattn/types.hpp>

#include <cstdint>

namespace spattn::schedules {

// The tiles for a fast memory of cache_words words: the outer tile of each loop nest as large as
// fits next to an inner tile of min(16, outer_1 / 16) rows (at least 1; outer_1 = the outer tile
// that fits next to a 1-row inner tile), both capped at their sequence lengths; when the outer
// tile is capped, the inner tile grows into the memory left. block_sparse fits the tiles next to
// the mask's resident index words (same rule, flash_resident_words(..., block_sparse) <= M). This
// is the rule for every flash run; over a mask, flash_tiles_for_mask() (flash_tile_choice.hpp) may
// limit each nest's outer tile below it (nest_tiles below). Tiles never depend on the mask's own
// block size.
// For PlanObjective::time an outer tile of 64 rows or more that splits its sequence and whose last
// 16-row chunk is at most half full is rounded down to whole chunks (the kernels' lanes; see
// dense_flash_tiles.cpp): a few more words for fewer wasted lanes. PlanObjective::words (the I/O
// study, the default) keeps every outer tile as large as M allows.
// Throws InvalidArgument when cache_words < flash_min_cache_words(shape, pass, masking), stating
// the minimum.
FlashTiles flash_tiles(const HeadShape& shape, int64_t cache_words, Pass pass,
                       FlashMasking masking = FlashMasking::dense, PlanObjective objective = PlanObjective::words);

// The tiles of a backward with dQ in the dK/dV pass (FlashTiles::dq_in_dkdv), by the same rule
// for its one gradient nest (fused_dkdv_nest), and the D pre-pass's query tiles (block_q) as large
// as M holds (2 d_v + 1 words a row); block_k 0. Throws InvalidArgument when cache_words <
// flash_min_cache_words(shape, backward, masking, true), stating the minimum.
FlashTiles fused_flash_tiles(const HeadShape& shape, int64_t cache_words, FlashMasking masking = FlashMasking::dense,
                             PlanObjective objective = PlanObjective::words);

// flash_tiles()' choice for one nest with the outer tile at most outer_limit rows (>= 1; a limit
// at or above flash_tiles()' outer tile changes nothing). Below it, the inner tile is
// min(16, what fits next to the limited outer tile), at most its sequence length: the memory the
// limit frees goes no further, so the resident words stay <= M. Used by the mask-aware choice
// (flash_tile_choice.hpp). Throws InvalidArgument when M is below flash_min_cache_words.
namespace flash_detail {
NestTiles nest_tiles(const HeadShape& shape, int64_t cache_words, FlashNest nest, FlashMasking masking,
                     int64_t outer_limit, PlanObjective objective = PlanObjective::words);
}  // namespace flash_detail

}  // namespace spattn::schedules
