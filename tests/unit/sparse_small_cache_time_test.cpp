// The density-adaptive small-cache schedule under PlanObjective::time: the work estimate the time
// price reads (hand-counted) and the tile choice that minimizes the price (never above the fewest
// words' tiles' price, wider windows on random masks). Runs with those tiles:
// sparse_small_cache_determinism_test.cpp (TimeTilesMoveThePredictedWordsAndOnlyTheChunkChangesBits).
#include "plan/price.hpp"
#include "plan/sparse_small_cache_tile_choice.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <sparse_formats/convert.hpp>
#include <sparse_formats/patterns.hpp>

#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using sparse_formats::CsrPattern;
using spattn::PlanObjective;
using spattn::testing::kSanitized;

SparseSmallCacheMask prepare(const CsrPattern<int32_t>& mask) {
  return SparseSmallCacheMask(sparse_formats::convert_index<int64_t>(mask.view()).view());
}

SparseMaskCounts counts_of(const SparseSmallCacheMask& mask) {
  return SparseMaskCounts(sparse_formats::CsrPatternView<int64_t>{mask.seqlen_q(), mask.seqlen_k(),
                                                                  mask.row_ptr().data(), mask.col_idx().data()});
}

SparseSmallCacheMask prepare_spec(const std::string& spec, int64_t m, int64_t n) {
  return prepare(sparse_formats::make_pattern(sparse_formats::parse_pattern_spec(spec), m, n));
}

SparseSmallCacheTiles all_sweeps(SparseSmallCacheTiles tiles, const SparseSweepTiles& sweep) {
  tiles.scores = tiles.output = tiles.probs = tiles.d_scores = tiles.dq = tiles.dk = tiles.dv = sweep;
  return tiles;
}

// The diagonal of a 4 x 4 problem, d = e = 2, every sweep in 2-row blocks of one chunk: two
// blocks per sweep, each with 2 entries touching 2 columns.
//   one-column windows: 2 windows per block; the scan checks 2 rows x 2 windows = 4, the queue
//     would do 2 x (2 row visits + 2 rows) x 2 heap levels = 16: 4 per block, 8 per sweep;
//   four-column windows: the 2 touched columns of 4 take 1 window (2 / (1 + 3 x 2 / 4), rounded
//     up): the scan checks 2 rows, 4 per sweep;
//   two chunks of 1: every walk and every entry twice.
// Entry visits: 4 entries x chunks per sweep. Flops: 2 (d + e) = 8 per entry forward, 6 d + 4 e =
// 20 backward (arithmetic.hpp).
TEST(SparseSmallCacheTime, WorkIsHandCountedOnTheDiagonal) {
  const SparseSmallCacheMask mask = prepare(sparse_formats::sliding_window_pattern(4, 4, 0));  // the diagonal
  const SparseMaskCounts counts = counts_of(mask);
  const HeadShape shape{4, 4, 2, 2};
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    SCOPED_TRACE(spattn::pass_name(pass));
    const int64_t sweeps = pass == Pass::forward ? 2 : 5;
    const auto chosen = sparse_small_cache_tiles(shape, counts, 1000, pass);
    const auto narrow = estimate_sparse_small_cache_work(shape, counts, all_sweeps(chosen, {2, 1, 2}));
    EXPECT_EQ(narrow.entry_visits, sweeps * 4);
    EXPECT_EQ(narrow.walk_steps, sweeps * 8);
    EXPECT_EQ(narrow.flops, (pass == Pass::forward ? 8 : 20) * 4);
    const auto wide = estimate_sparse_small_cache_work(shape, counts, all_sweeps(chosen, {2, 4, 2}));
    EXPECT_EQ(wide.entry_visits, sweeps * 4);
    EXPECT_EQ(wide.walk_steps, sweeps * 4);
    const auto chunked = estimate_sparse_small_cache_work(shape, counts, all_sweeps(chosen, {2, 1, 1}));
    EXPECT_EQ(chunked.entry_visits, sweeps * 8);
    EXPECT_EQ(chunked.walk_steps, sweeps * 16);
    EXPECT_EQ(chunked.flops, narrow.flops);
    // The price at the process's rates (spattn::time_rates()) for 100 words: 100 words, 8 or 20
    // visits, 16 or 40 walk steps and 32 or 80 flops (forward, backward). At avx512's built-in
    // rates (16 per word, 1200 per visit, 4000 per walk step, 4 per flop) that is forward
    // 1600 + 9600 + 64000 + 128 = 75328.
    const spattn::TimeRates& r = spattn::time_rates();
    const double visits = pass == Pass::forward ? 8 : 20, steps = 2 * visits, flops = 4 * visits;
    EXPECT_EQ(sparse_small_cache_time_price(100, narrow),
              spattn::plan_detail::saturated_price(r.word * 100 + r.small_cache_entry_visit * visits +
                                                 r.small_cache_walk_step * steps + r.small_cache_flop * flops));
  }
  // An empty mask does no work but the tiles'.
  const SparseSmallCacheMask empty = prepare(CsrPattern<int32_t>::empty(4, 4));
  const SparseMaskCounts empty_counts = counts_of(empty);
  const auto work = estimate_sparse_small_cache_work(
      shape, empty_counts, sparse_small_cache_tiles(shape, empty_counts, 1000, Pass::backward));
  EXPECT_EQ(work.entry_visits, 0);
  EXPECT_EQ(work.walk_steps, 0);
  EXPECT_EQ(work.flops, 0);
}

int64_t price_of(const HeadShape& shape, const SparseMaskCounts& counts, const SparseSmallCacheTiles& tiles) {
  const SparseIo io = tiles.pass == Pass::forward ? predict_sparse_small_cache_forward(shape, counts, tiles)
                                                  : predict_sparse_small_cache_backward(shape, counts, tiles);
  return sparse_small_cache_time_price(io.total().total(), estimate_sparse_small_cache_work(shape, counts, tiles));
}

int64_t words_of(const HeadShape& shape, const SparseMaskCounts& counts, const SparseSmallCacheTiles& tiles) {
  return (tiles.pass == Pass::forward ? predict_sparse_small_cache_forward(shape, counts, tiles)
                                      : predict_sparse_small_cache_backward(shape, counts, tiles))
      .total()
      .total();
}

// The time tiles fit, never cost more than the fewest words' tiles (a guard: those are among
// the candidates, so only a broken search fails it), and on uniform random masks at the bench's M open windows of 16 columns or more
// (the fewest words leave what the row block does not take); the words they cost more are printed
// (up to 1.5x here at n 1024, more at larger n: the price finds the walks' and chunks' savings
// worth it).
TEST(SparseSmallCacheTime, TimeTilesFitAndNeverCostMoreThanTheFewestWords) {
  const int64_t n = kSanitized ? 257 : 1024;
  for (const char* spec : {"random:p=0.05,seed=1", "random:p=0.005,seed=2", "sliding_window:w=16", "causal",
                           "bigbird:block=16,w=1,g=1,r=2"}) {
    const SparseSmallCacheMask mask = prepare_spec(spec, n, n);
    const SparseMaskCounts counts = counts_of(mask);
    for (const int64_t d : {16, 64}) {
      const HeadShape shape{n, n, d, d};
      for (const int64_t cache_words : {11, 300, 49152}) {
        for (const Pass pass : {Pass::forward, Pass::backward}) {
          SCOPED_TRACE(std::string(spec) + ", d " + std::to_string(d) + ", M " + std::to_string(cache_words) + ", " +
                       spattn::pass_name(pass));
          const auto time = sparse_small_cache_tiles(shape, counts, cache_words, pass, PlanObjective::time);
          // The fewest words: the word model's tiles (lines of one word), from the same candidates.
          const auto words = sparse_small_cache_tiles(shape, counts, cache_words, pass, PlanObjective::words, 1);
          EXPECT_LE(sparse_small_cache_fast_words(time), cache_words);
          EXPECT_LE(price_of(shape, counts, time), price_of(shape, counts, words));
          if (std::string(spec).rfind("random", 0) == 0 && cache_words == 49152) {
            const auto& sweep = pass == Pass::forward ? time.scores : time.probs;
            EXPECT_GE(sweep.block_cols, 16);
            std::printf("%s d %lld %s: time tiles move %.2fx the fewest words\n", spec, static_cast<long long>(d),
                        spattn::pass_name(pass),
                        static_cast<double>(words_of(shape, counts, time)) /
                            static_cast<double>(words_of(shape, counts, words)));
          }
        }
      }
    }
  }
}

}  // namespace
