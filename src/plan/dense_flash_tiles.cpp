// The dense flash tiles (dense_flash_tiles.hpp): each loop nest's outer tile as large as M allows
// next to a short inner tile, from the schedule's own resident words (flash_nests.hpp).
#include "plan/dense_flash_tiles.hpp"

#include "cpu/kernels/flash_kernels.hpp"  // kBlockRows
#include "schedules/flash/flash_nests.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cstdint>

namespace spattn::schedules {

namespace {

using namespace flash_detail;

// The inner tile never exceeds this many rows, nor 1/Nest::inner_fraction of the outer tile: it
// moves no extra word but takes memory from the outer tile, which sets the I/O. A few rows keep
// the inner loops matrix-matrix shaped (and the forward's online-softmax rescaling rare).
constexpr int64_t kMaxInnerRows = 16;

// The kernels take a tile's inner rows in blocks of flash_kernels::kBlockRows (8), and a block of
// 1 to 7 rows more costs about as much as a whole one. So where the outer tile has room for 64
// rows or more, the inner tile is a whole number of blocks: 8 or 16 rows. At n = 4096, d = 128,
// M = 49152 the forward's 11-row inner tile (8 + 3) ran 1.18x to 1.23x slower than 8 or 16 rows
// (one thread; the outer tile 172 rows against 177), the two-pass backward's 5 and 7 rows over
// BigBird 1.2x slower than 8; the fused backward's 9 rows (n = 4096, d = 64) 1.25x (one thread)
// and 1.45x (two) slower than 16. Below 64 rows (M near d^2, the paper's regime) the inner tile
// stays outer / inner_fraction: there a larger one would cost the outer tile, and the words, more
// than a few percent.
constexpr int64_t kBlockRows = flash_kernels::kBlockRows;
int64_t whole_blocks(int64_t inner) { return inner >= kBlockRows ? inner / kBlockRows * kBlockRows : inner; }
int64_t inner_rows(int64_t outer_1, int64_t fraction) {
  const int64_t by_fraction = std::min(kMaxInnerRows, outer_1 / fraction);
  return outer_1 >= kBlockRows * kBlockRows ? whole_blocks(std::max(by_fraction, kBlockRows)) : by_fraction;
}

// The score products take the outer tile's rows in chunks of flash_kernels::kOuterChunkRows (16)
// lanes; a tile of 16 c + r rows (0 < r < 16) computes a whole chunk for its last r rows (177
// rows: 12 chunks for 11.06, about 8 % more score products and exps). So, planned for time, an
// outer tile of 64 rows or more that splits its sequence, and whose last chunk is at most half
// full (r <= 8), is rounded down to a multiple of 16. It drops at most 8 rows (the inner operands
// stream once more per sequence where the tile count grows; 70 -> 64 rows: 8 % more words in the
// backward at n = 4096, d = 128) and saves at least 8 lanes. At n = 4096, M = 49152 the full
// mask's fwd + bwd ran 0.88x (d = 64: outer tiles 322 -> 320, 130 -> 128) and 0.89x (d = 128:
// 177 -> 176, 70 -> 64) the time of the unrounded tiles (one thread, 7 pairs; docs/results.md
// section 2.15). A fuller last chunk (79 rows) stays: rounding would cost up to 23 % more tiles to
// save a few lanes. Below 64 rows (M near d^2) the tiles are the same for both objectives; planned
// for words (the I/O study) no tile is rounded.
constexpr int64_t kChunkRows = flash_kernels::kOuterChunkRows;
int64_t whole_chunks(int64_t outer) {
  const bool round = outer >= 4 * kChunkRows && outer % kChunkRows <= kChunkRows / 2;
  return round ? outer / kChunkRows * kChunkRows : outer;
}

// Precondition: cache_words >= nest.resident(1, 1). outer_limit caps the outer tile below what M
// allows (flash_tile_choice.hpp); then the inner tile takes up to kMaxInnerRows of the memory left,
// in whole blocks (never more: in a masked run a larger inner tile covers more pairs outside the
// mask).
NestTiles choose(const Nest& nest, int64_t cache_words, int64_t outer_limit, PlanObjective objective) {
  const int64_t outer_cap = std::max<int64_t>(nest.outer_rows, 1);
  const int64_t inner_cap = std::max<int64_t>(nest.inner_rows, 1);
  const int64_t outer_1 = nest.outer_fit(cache_words, 1);
  NestTiles tiles;
  if (outer_1 >= outer_cap) {
    // The whole sequence fits as one outer tile: take it, so the inner operands stream once, and
    // give the memory left to the inner tile (a smaller inner tile than kMaxInnerRows where that
    // is what keeps the outer tile whole: splitting it would read the inner operands twice).
    tiles.outer = outer_cap;
    tiles.inner = std::clamp<int64_t>(nest.inner_fit(cache_words, outer_cap), 1, inner_cap);
  } else {
    tiles.inner = std::clamp<int64_t>(inner_rows(outer_1, nest.inner_fraction), 1, inner_cap);
    tiles.outer = std::min(nest.outer_fit(cache_words, tiles.inner), outer_cap);
    if (objective == PlanObjective::time) tiles.outer = whole_chunks(tiles.outer);
    if (tiles.outer < 1) tiles = {std::min(outer_1, outer_cap), 1};  // defensive; see docs/flash.md
  }
  if (outer_limit < tiles.outer && outer_limit >= 1) {
    tiles.outer = outer_limit;
    const int64_t inner = std::min(kMaxInnerRows, nest.inner_fit(cache_words, outer_limit));
    tiles.inner = std::clamp<int64_t>(whole_blocks(inner), 1, inner_cap);
  }
  return tiles;
}

}  // namespace

namespace flash_detail {

NestTiles nest_tiles(const HeadShape& shape, int64_t cache_words, FlashNest nest, FlashMasking masking,
                     int64_t outer_limit, PlanObjective objective) {
  const Pass pass = nest == FlashNest::forward ? Pass::forward : Pass::backward;
  const bool fused = nest == FlashNest::fused_dkdv;
  if (cache_words < flash_min_cache_words(shape, pass, masking, fused)) {
    fail("nest_tiles: M = ", cache_words, " words is below the minimum ",
         flash_min_cache_words(shape, pass, masking, fused));
  }
  return choose(nest_of(shape, nest, masking), cache_words, outer_limit, objective);
}

}  // namespace flash_detail

FlashTiles flash_tiles(const HeadShape& shape, int64_t cache_words, Pass pass, FlashMasking masking,
                       PlanObjective objective) {
  const int64_t minimum = flash_min_cache_words(shape, pass, masking);
  if (cache_words < minimum) {
    const int64_t d = shape.head_dim;
    const int64_t e = shape.head_dim_v;
    const char* mask_words = masking == FlashMasking::block_sparse
                                 ? " + 20 words of mask structure (list header, chunk, bits)"
                                 : "";
    if (pass == Pass::forward) {
      fail("flash forward: M = ", cache_words, " words is below the minimum ", minimum,
           " for head_dim ", d, " and head_dim_v ", e,
           " (1 x 1 tiles hold Q, O, max, sum | K, V | S: 2 d + 2 d_v + 3 words", mask_words, ")");
    }
    fail("flash backward: M = ", cache_words, " words is below the minimum ", minimum,
         " for head_dim ", d, " and head_dim_v ", e,
         " (1 x 1 tiles of the dK/dV pass hold K, V, dK, dV | Q, dO, LSE, D | P: 3 d + 3 d_v + 3 "
         "words", mask_words, ")");
  }
  constexpr int64_t kNoLimit = INT64_MAX;
  FlashTiles tiles;
  if (pass == Pass::forward) {
    const NestTiles t = choose(forward_nest(shape, masking), cache_words, kNoLimit, objective);
    tiles.block_q = t.outer;
    tiles.block_k = t.inner;
    return tiles;
  }
  const NestTiles kv = choose(dkdv_nest(shape, masking), cache_words, kNoLimit, objective);
  const NestTiles q = choose(dq_nest(shape, masking), cache_words, kNoLimit, objective);
  tiles.block_q = q.outer;
  tiles.block_k = q.inner;
  tiles.dkdv_block_k = kv.outer;
  tiles.dkdv_block_q = kv.inner;
  return tiles;
}

FlashTiles fused_flash_tiles(const HeadShape& shape, int64_t cache_words, FlashMasking masking,
                             PlanObjective objective) {
  const int64_t minimum = flash_min_cache_words(shape, Pass::backward, masking, true);
  if (cache_words < minimum) {
    fail("flash backward with dQ in the dK/dV pass: M = ", cache_words, " words is below the minimum ", minimum,
         " for head_dim ", shape.head_dim, " and head_dim_v ", shape.head_dim_v,
         " (1 x 1 tiles hold K^T, V^T, K, dK, dV | Q, dO, dQ, LSE, D | P, dS^T: 5 d + 3 d_v + 4 words",
         masking == FlashMasking::block_sparse ? " + 20 words of mask structure" : "", ")");
  }
  const NestTiles kv = choose(fused_dkdv_nest(shape, masking), cache_words, INT64_MAX, objective);
  FlashTiles tiles;
  tiles.block_q = std::clamp<int64_t>(cache_words / delta_words_per_row(shape), 1, std::max<int64_t>(shape.seqlen_q, 1));
  tiles.block_k = 0;
  tiles.dkdv_block_k = kv.outer;
  tiles.dkdv_block_q = kv.inner;
  tiles.dq_in_dkdv = true;
  return tiles;
}

}  // namespace spattn::schedules
