// The density-adaptive small_cache's tiles, chosen for an objective (spattn/plan.hpp), and the
// time objective's price of its run. The schedule (schedules/sparse_small_cache) states what a
// set of tiles holds, moves and does; this chooses among them.
#pragma once

#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/plan.hpp>

#include <cstdint>

namespace spattn::schedules {

// Chooses each sweep's tiles for fast memory of `cache_words` words: for every chunk width that
// gives a distinct number of chunks (about 2 sqrt(d) widths; with line_words > 1 also every
// whole-line chunk) and each run (the powers of two dividing line_words), three row blocks (the
// largest that fits, as many evenly sized, the largest power of two below), each priced by the
// exact prediction (walking the mask: O(nnz + rows) per row block size, memoized).
//   objective words: the fewest lines of line_words words, then the fewest words (line_words = 1:
//     the fewest words), in M / 2 when line_words > 1 (docs/io_model.md, "Headroom"); the column
//     window takes the memory left (it changes no count, only how often the rows are scanned:
//     usually 1 column).
//   objective time: the smallest sparse_small_cache_time_price (below), in all of M, with runs
//     of one word (faster natively at n = 1024 than line-sized runs); at the best chunk the
//     candidates also reserve windows of 16, 64, 256 and 1024 columns (a wide window costs some
//     of the row block, and lets a walk find its rows once per window instead of once per
//     column). The price also prefers fewer chunks (each re-walks the entries): on uniform
//     random masks at n 4096 the time tiles take the whole head_dim in one chunk with blocks of
//     about 100 to 700 rows, 1.6x to 3.5x the fewest words, and run 2x to 5x faster. A tie keeps
//     the smaller row block (the same words in evenly sized blocks share better between workers).
// Both are deterministic in (shape, mask, M, pass, objective), never in the thread count; the
// window and the row block change no bit of the results, the chunk does (the order of the sums).
// Throws InvalidArgument stating the minimum when cache_words is below it, or when the shape
// disagrees with the mask or has a negative size.
SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape,
                                               const SparseSmallCacheMask& mask,
                                               int64_t cache_words, Pass pass,
                                               PlanObjective objective = PlanObjective::words,
                                               int64_t line_words = io::kDefaultLineWords);

// The same choice from the mask's counts alone (sparse_mask_counts.hpp; equal tiles): the planner
// prices small_cache this way, without building a SparseSmallCacheMask.
SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape, const SparseMaskCounts& mask,
                                               int64_t cache_words, Pass pass,
                                               PlanObjective objective = PlanObjective::words,
                                               int64_t line_words = io::kDefaultLineWords);

// PlanObjective::time's price of a run with `words` moved and `work` done, in flops of flash's
// kernels, at spattn::time_rates() (per word, entry visit, walk step and flop).
int64_t sparse_small_cache_time_price(int64_t words, const SparseSmallCacheWork& work);

}  // namespace spattn::schedules
