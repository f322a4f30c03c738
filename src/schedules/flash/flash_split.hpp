// How a team splits flash's outer tiles (flash_heads.hpp): by their work, so that the long and the
// short tiles of a causal, banded or document mask even out over the workers. A tile's work is
// estimated from its list of inner tiles; the estimate moves only which worker runs a tile, never
// what the tile computes or moves. One worker gets every item in order, with no costs computed.
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <cstdint>
#include <vector>

namespace spattn::schedules::flash_detail {

// The inner rows outer tile `outer` of `lists` visits (every inner row when lists is null:
// `inner_rows`, the length the inner tiles cover).
int64_t visited_inner_rows(const FlashTileLists* lists, int64_t outer, int64_t inner_rows);

// The items of the forward (head * query tiles + query tile) split over `workers`
// (cpu::split_by_cost): a query tile's rows x the key rows it visits x (d + e).
std::vector<std::vector<int64_t>> forward_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                const FlashMask* mask, int workers);

// The items of the backward's gradient phase, the dK/dV pass's (head * key tiles + key tile)
// then the dQ pass's (dkdv_items + head * query tiles + query tile), split over `workers`: a key
// tile's rows x the query rows it visits x 2 (d + e), a query tile's rows x the key rows x (2 d + e).
std::vector<std::vector<int64_t>> gradient_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                 const FlashMask* mask, int workers);

// The items of a fused backward's gradient phase (FlashTiles::dq_in_dkdv), head * key tiles + key
// tile, split over `workers`: a key tile's rows x the query rows it visits x (3 d + 2 e).
std::vector<std::vector<int64_t>> fused_gradient_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                       const FlashMask* mask, int workers);

}  // namespace spattn::schedules::flash_detail
