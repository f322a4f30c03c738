// The density-adaptive small_cache's tile choice and time price
// (sparse_small_cache_tile_choice.hpp).
#include "plan/sparse_small_cache_tile_choice.hpp"

#include "plan/price.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <vector>

namespace spattn::schedules {

using namespace sparse_small_cache_detail;
using plan_detail::saturated_price;

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// What choose_sweep minimizes for a sweep's tiles, first then second: for words, the lines and
// then the words (the words alone when L = 1); for time, the time price of the words, the entry
// visits and the walk (the flops are the same for every tile of a sweep; words, not lines:
// docs/results.md 2.4, "Words or lines over a mask").
struct SweepPrice {
  int64_t first = -1;
  int64_t second = 0;
  bool operator<(const SweepPrice& other) const {
    return first != other.first ? first < other.first : second < other.second;
  }
  bool operator==(const SweepPrice& other) const { return first == other.first && second == other.second; }
};
SweepPrice sweep_price(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                       const SparseSweepTiles& tiles, int64_t touched, PlanObjective objective,
                       int64_t line_words) {
  const int64_t words = sweep_io(sweep, shape, mask, tiles, touched).total().total();
  if (objective == PlanObjective::words) {
    const int64_t lines =
        line_words == 1 ? words : sweep_lines(sweep, shape, mask, tiles, touched, line_words).total().total();
    return {lines, words};
  }
  SparseSmallCacheWork work;
  work.entry_visits = sweep_entry_visits(sweep, shape, mask, tiles);
  work.walk_steps = sweep_walk_steps(sweep, shape, mask, tiles, touched);
  return {sparse_small_cache_time_price(words, work), words};
}

// The column windows the time objective reserves room for (besides the 1-column window that
// takes what the largest row block leaves).
constexpr int64_t kReservedWindows[] = {16, 64, 256, 1024};

// The tiles of one sweep with the smallest sweep_price (sparse_small_cache_tiles).
SparseSweepTiles choose_sweep(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                              int64_t cache_words, PlanObjective objective, int64_t line_words) {
  const SweepTraits traits = sweep_traits(sweep);
  const int64_t w = std::max<int64_t>(sweep_width(sweep, shape), 1);
  const int64_t rows = std::max<int64_t>(traits.transposed ? mask.seqlen_k() : mask.seqlen_q(), 1);
  const int64_t cols = std::max<int64_t>(traits.transposed ? mask.seqlen_q() : mask.seqlen_k(), 1);
  SparseSweepTiles best;
  SweepPrice best_price;
  // Row blocks for a chunk, a reserved window and a run: the largest that fits; as many blocks,
  // evenly sized (a short last block re-reads the B rows its few rows touch); the largest power
  // of two below (masks built of aligned blocks, BigBird, random blocks). The window takes what is
  // left.
  const auto try_blocks = [&](int64_t chunk, int64_t window, int64_t run) {
    const int64_t run_per_row = run > 1 ? run_words_per_row(traits, run) : 0;
    const int64_t per_row = chunk + kRowIndexWords + traits.row_words + run_per_row;
    const int64_t one_word_runs = run > 1 ? 0 : traits.entry_runs;
    const int64_t fixed_words = 1 + one_word_runs + (traits.transposed ? gather_words(run) : 0);
    // A transposed sweep gathering pieces walks 1-column windows (sparse_small_cache.hpp).
    const bool one_column = traits.transposed && run > 1;
    if (cache_words < fixed_words + window * (chunk + 1) + per_row) return;
    const int64_t largest = std::min((cache_words - fixed_words - window * (chunk + 1)) / per_row, rows);
    int64_t power = 1;
    while (power * 2 <= largest) power *= 2;
    for (const int64_t block_rows : {largest, ceil_div(rows, ceil_div(rows, largest)), power}) {
      SparseSweepTiles tiles;
      tiles.chunk = chunk;
      tiles.run = run;
      tiles.block_rows = block_rows;
      tiles.block_cols =
          one_column ? 1 : std::min((cache_words - fixed_words - block_rows * per_row) / (chunk + 1), cols);
      const SweepPrice price = sweep_price(sweep, shape, mask, tiles,
                                           touched_of(mask, traits.transposed, block_rows), objective, line_words);
      // On a tie: words keeps the larger block (its choice since the start), time the smaller
      // (evenly sized blocks split better over workers).
      const bool tie_wins = objective == PlanObjective::words ? block_rows > best.block_rows
                                                              : block_rows < best.block_rows;
      if (best_price.first < 0 || price < best_price || (price == best_price && tie_wins)) {
        best = tiles;
        best_price = price;
      }
    }
  };
  // Runs: for the I/O, every power of two that divides a line (each run inside one line), from
  // single words to whole lines: a longer run moves fewer lines, a shorter one needs smaller run
  // buffers per row. For time, single words: at n = 1024 the runs' bookkeeping cost more time
  // than the lines they save (docs/sparse_small_cache.md, "Tiles for time").
  std::vector<int64_t> runs;
  for (int64_t run = 1; run <= line_words && line_words % run == 0; run *= 2) {
    if (run == 1 || objective == PlanObjective::words) runs.push_back(run);
  }
  for (const int64_t run : runs) {
    int64_t previous_chunk = 0;
    for (int64_t count = 1; count <= w; ++count) {
      const int64_t chunk = ceil_div(w, count);  // the narrowest chunk giving `count` chunks
      if (chunk == previous_chunk) continue;
      previous_chunk = chunk;
      try_blocks(chunk, 1, run);
    }
    // Lines counted: also chunks of whole lines (every chunk but the last starts and ends on a
    // line; a chunk boundary inside a line costs that line twice).
    for (int64_t chunk = line_words; line_words > 1 && chunk < w; chunk += line_words) {
      if (w % chunk != 0 && ceil_div(w, ceil_div(w, chunk)) != chunk) try_blocks(chunk, 1, run);
    }
  }
  // Wider windows at the chosen chunk and run only: each candidate row block costs a count of the
  // touched columns (O(nnz) on an unstructured mask).
  if (objective == PlanObjective::time) {
    const int64_t chunk = best.chunk;
    const int64_t run = best.run;
    for (const int64_t window : kReservedWindows) {
      if (window < cols) try_blocks(chunk, window, run);
    }
  }
  return best;  // the minimum M guarantees that count = 1 (or the widest fitting chunk) fits
}

}  // namespace

SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape,
                                               const SparseSmallCacheMask& mask,
                                               int64_t cache_words, Pass pass, PlanObjective objective,
                                               int64_t line_words) {
  return sparse_small_cache_tiles(shape, counts_of(mask), cache_words, pass, objective, line_words);
}

SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape, const SparseMaskCounts& mask,
                                               int64_t cache_words, Pass pass, PlanObjective objective,
                                               int64_t line_words) {
  check_shape("sparse_small_cache_tiles", shape);
  io::check_line_words("sparse_small_cache_tiles", line_words);
  check_mask("sparse_small_cache_tiles", shape, mask);
  const int64_t minimum = sparse_small_cache_min_cache_words(pass);
  if (cache_words < minimum) {
    fail("sparse_small_cache_tiles: fast memory M = ", cache_words,
         " words is below the minimum of ", minimum, " words for the sparse small-cache ",
         pass_name(pass), " (1-row blocks, 1-column windows, 1-wide chunks, their index words ",
         "and the row statistics)");
  }
  SparseSmallCacheTiles tiles;
  tiles.pass = pass;
  tiles.shape = shape;
  tiles.cache_words = cache_words;
  tiles.nnz = mask.nnz();
  tiles.line_words = line_words;
  // For the I/O, half of M when lines are counted, as the dense small_cache's tiles
  // (docs/io_model.md, "Headroom"): every move is a copy whose source lines pass through the
  // cache beside the tiles. Never below the minimum. The time objective's tiles take all of M:
  // half of it means fewer rows per block, and more B rows re-read.
  const bool headroom = line_words > 1 && objective == PlanObjective::words;
  const int64_t budget = headroom ? std::max(minimum, cache_words / 2) : cache_words;
  for (Sweep sweep : sweeps_of(pass)) {
    tiles_of(tiles, sweep) = choose_sweep(sweep, shape, mask, budget, objective, line_words);
  }
  return tiles;
}

int64_t sparse_small_cache_time_price(int64_t words, const SparseSmallCacheWork& work) {
  const TimeRates& rates = time_rates();
  return saturated_price(rates.word * static_cast<double>(words) +
                         rates.small_cache_entry_visit * static_cast<double>(work.entry_visits) +
                         rates.small_cache_walk_step * static_cast<double>(work.walk_steps) +
                         rates.small_cache_flop * static_cast<double>(work.flops));
}

}  // namespace spattn::schedules
