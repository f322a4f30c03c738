// The block-sparse flash tiles for one mask (docs/block_sparse.md, "Tile choice for a mask").
//
// flash_tiles() (flash.hpp) makes each loop nest's outer tile as large as M allows: the fewest
// words moved. Over a mask, a tile visits every stored (outer tile, inner tile) pair whole, so a
// large outer tile also computes many pairs outside the mask: on a band of half-width w, a query
// tile of b rows computes about b (b + 2 w + inner) scores for b (2 w + 1) attended ones (2.25x at
// w = 128, b = 321). Fewer rows per outer tile compute fewer wasted pairs and re-read the streamed
// operand more often. This choice weighs the two per nest:
//
//   cost = words moved + flops / kFlopsPerWord
//
// where flops = (flops per computed pair) x (pairs in visited tiles): 2 (d + e) in the forward,
// 4 d + 2 e in the dQ pass, 4 (d + e) in the dK/dV pass; kFlopsPerWord is the measured exchange
// rate (docs/block_sparse.md gives the measurements). Candidates: flash_tiles()' own tiles and the
// same rule with the outer tile limited to 32, 48, 64, 96, 128, 192, ... rows (never below 32: the
// kernels vectorize along the outer tile's rows, and at 16 rows their per-tile overheads cost more
// than the pairs saved). The smallest cost wins; a tie keeps the larger tile (fewer words).
//
// The counts are estimated from each query row's first and last attended key (O(seqlen_q + number
// of candidates x seqlen_q), never the mask's nnz): a query tile is taken to visit every key tile
// between its rows' first and last keys. That is exact for masks whose tiles' attended keys are
// contiguous (windows, causal, documents, prefix-LM) and an overestimate otherwise (global tokens,
// random or strided entries widen the spans: for a uniform random mask every span is nearly the
// whole row and flash_tiles()' own tiles win; for BigBird the limit is milder than an exact count
// would give). The estimate only chooses the tiles: the words the run moves are predicted exactly
// from the FlashMask built for the chosen tiles, as for any tiles.
#pragma once

#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"

#include <sparse_formats/csr.hpp>
#include <sparse_formats/intervals.hpp>

#include <cstdint>
#include <vector>

namespace spattn::schedules {


// The exchange rate of the cost above: flops that take as long as moving one word, measured on
// the bench machine (docs/block_sparse.md: about 13 from a sweep of the window's forward; 16, 32
// and 64 were run against each other, 16 was the fastest by about 5 % at d = 64).
// (Kept apart from auto's rates, spattn::time_rates(), which are fitted per machine to choose
// between the algorithms; this one was measured for the tile choice and is the same everywhere.)
inline constexpr int64_t kFlopsPerWord = 16;

namespace flash_detail {
// Each query row's first and last attended key (last = -1 for a row that attends nothing): what
// the estimate reads, built once per choice in O(seqlen_q).
struct MaskSpans {
  int64_t seqlen_k = 0;
  std::vector<int64_t> first, last;  // (seqlen_q)
};
}  // namespace flash_detail

// The tiles for `mask` (seqlen_q x seqlen_k of `shape`, trusted structure with sorted columns) at
// M = cache_words: the candidates of the pass's nests (the forward's; the backward's dQ and
// dK/dV nests together) with the smallest summed cost among those whose words (an upper bound from
// the estimate: every visited tile counted partial) stay within max_words; flash_tiles()' own
// tiles for PlanObjective::time are always allowed. Always fits in M
// (flash_resident_words(shape, tiles, pass, block_sparse) <= M). Deterministic in (shape, M,
// pass, mask, max_words). Throws InvalidArgument when M < flash_min_cache_words(shape, pass,
// block_sparse) (flash_tiles' message) or the mask's shape is not seqlen_q x seqlen_k.
FlashTiles flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, Pass pass,
                                const flash_detail::MaskSpans& spans, int64_t max_words = INT64_MAX);
template <typename Index>
FlashTiles flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, Pass pass,
                                const sparse_formats::CsrPatternView<Index>& mask,
                                int64_t max_words = INT64_MAX);

// The tiles block-sparse flash plans and runs with over `mask` for an objective (spattn/plan.hpp):
// words, flash_tiles()' own; time, flash_tiles_for_mask() without a word cap. (Until auto priced
// time, the API capped flash's words at small_cache's, because auto compared words: smaller tiles
// could have handed small_cache a mask it runs slower. Auto now compares time prices: this
// choice's words + flops, plus a price per pair of a partial tile that the choice does not weigh
// (smaller tiles over a band have as many partial tiles, each smaller), so smaller tiles lower
// flash's price where they lower words + flops.)
inline FlashTiles masked_flash_tiles(const HeadShape& shape, int64_t cache_words, Pass pass,
                                     const flash_detail::MaskSpans& spans, PlanObjective objective) {
  return objective == PlanObjective::time ? flash_tiles_for_mask(shape, cache_words, pass, spans)
                                          : flash_tiles(shape, cache_words, pass, FlashMasking::block_sparse);
}

// The tiles of a backward with dQ in the dK/dV pass (FlashTiles::dq_in_dkdv) over a mask, for an
// objective: words, fused_flash_tiles()' own; time, the candidate of the fused dK/dV nest (as
// flash_tiles_for_mask's) with the smallest cost. Throws InvalidArgument when M is below
// flash_min_cache_words(shape, backward, block_sparse, true).
FlashTiles fused_flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, const flash_detail::MaskSpans& spans);
inline FlashTiles masked_fused_flash_tiles(const HeadShape& shape, int64_t cache_words,
                                           const flash_detail::MaskSpans& spans, PlanObjective objective) {
  return objective == PlanObjective::time ? fused_flash_tiles_for_mask(shape, cache_words, spans)
                                          : fused_flash_tiles(shape, cache_words, FlashMasking::block_sparse);
}

namespace flash_detail {

template <typename Index>
MaskSpans mask_spans(const sparse_formats::CsrPatternView<Index>& mask);
MaskSpans mask_spans(const sparse_formats::IntervalPattern& mask);  // O(seqlen_q) from the intervals

// The estimate the choice minimizes, for one nest's tiles (exposed for the tests): pairs in the
// (query tile, key tile) pairs visited and words moved (values, list headers and runs; partial
// tiles' bit sets are left out), from the spans as above. The runs are counted from each query
// tile's span of key tiles and the span every one of its rows covers whole (partial, full,
// partial), exact where the tiles' attended keys are contiguous.
struct NestEstimate {
  int64_t pairs = 0;
  int64_t words = 0;
  int64_t visited = 0;         // (query tile, key tile) pairs
  int64_t bit_words = 0;       // per partial tile: ceil(outer inner / 64)
  int64_t flops_per_pair = 0;  // of this nest
  // At least the words the nest moves with a FlashMask of these tiles where the attended keys of
  // its tiles are contiguous: words + every visited tile's bit set (only partial ones have bits).
  int64_t words_bound() const { return words + visited * bit_words; }
  // The cost above in units of 1 / kFlopsPerWord words (integers: the choice is exact).
  int64_t cost() const { return kFlopsPerWord * words + flops_per_pair * pairs; }
};
NestEstimate estimate_nest(const HeadShape& shape, FlashNest nest, const NestTiles& tiles,
                           const MaskSpans& spans);

}  // namespace flash_detail
}  // namespace spattn::schedules
