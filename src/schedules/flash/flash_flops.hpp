// The arithmetic flash does, next to the words it moves (what the planner's time price reads;
// small_cache's is small_cache_flops, small_cache.hpp). Flops are 2 per multiply-add of the products
// over head_dim (d) or head_dim_v (e); the softmax's exponentials and the row statistics are left
// out (they are per pair or per row, the same order for every schedule).
//
//   flash (dense or block-sparse)   every pair of every visited (query tile, key tile), attended
//                                   or not (an upper bound on a partial tile: the kernels skip
//                                   its blocks of 8 inner rows x lanes that attend nothing,
//                                   flash_kernels_ranges.hpp; the rates were fitted on these counts):
//     forward   2 (d + e) per pair              S = Q K^T, O += P V
//     backward  (4 d + 2 e) per pair of the     S, dP = dO V^T, dQ += dS K
//               dQ pass' tiles, 4 (d + e) per   S, dP, dK += dS^T Q, dV += P^T dO
//               pair of the dK/dV pass' tiles
//               (dQ in the dK/dV pass: 6 d + 4 e per pair of its tiles, each product once)
//   small_cache (dense: every pair; density-adaptive: the mask's entries), once per pair:
//     forward   2 (d + e)                        S, O
//     backward  6 d + 4 e                        P, dP, dQ, dK, dV
#pragma once

#include "schedules/flash/flash.hpp"

#include <cstdint>

namespace spattn::schedules {

struct FlashMask;
struct FlashTileLists;

// Flops per computed pair of one flash loop nest (the table above): forward 2 (d + e), dQ pass
// 4 d + 2 e, dK/dV pass 4 (d + e), the dK/dV pass with dQ in it 6 d + 4 e. The tile choice (flash_tile_choice.hpp) weighs pairs with it.
int64_t flash_flops_per_pair(const HeadShape& shape, flash_detail::FlashNest nest);

// Pairs in the stored tiles of one direction of a FlashMask (edge tiles count their real rows and
// columns), all of them or those of partial tiles only (where the kernels also apply the tile's
// mask bits). O(stored tiles).
int64_t stored_pairs(const FlashTileLists& lists, bool partial_only = false);

// flash's flops over `mask` (built for the tiles that run and for `pass`), or dense
// (mask == nullptr: every pair, whatever the tiles), for a backward with or without its dQ pass
// (FlashTiles::dq_in_dkdv). O(stored tiles).
int64_t flash_flops(const HeadShape& shape, const FlashMask* mask, Pass pass, bool dq_in_dkdv = false);

// The pairs of flash's partial tiles over `mask` (built for the tiles that run and for `pass`):
// the forward's, or the backward's two nests summed. 0 for the dense schedule (nullptr).
int64_t flash_partial_pairs(const FlashMask* mask, Pass pass);


}  // namespace spattn::schedules
