// Flash tiles planned for time (PlanObjective::time, src/plan/dense_flash_tiles.cpp): an outer tile
// of 64 rows or more that splits its sequence and whose last 16-row chunk is at most half full is
// rounded down to whole chunks of the kernels' 16 lanes; planned for words every outer tile stays as
// large as M allows. Hand values, the rule over every M for every nest, counted == predicted words
// and lines with the rounded tiles, and the planner taking them for time only.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "support/flash_runs.hpp"

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace {

using namespace spattn::schedules;
using spattn::PlanObjective;
using spattn::io::Ledger;
using spattn::testing::HeadFixture;

constexpr auto kTime = PlanObjective::time;
constexpr auto kWords = PlanObjective::words;

std::string describe(const HeadShape& s, int64_t m) {
  return "n_q " + std::to_string(s.seqlen_q) + ", n_k " + std::to_string(s.seqlen_k) + ", d " +
         std::to_string(s.head_dim) + ", d_v " + std::to_string(s.head_dim_v) + ", M " + std::to_string(m);
}

// The rule, stated on its own: the time tile from the words tile of the same nest.
int64_t rounded(int64_t outer, int64_t seqlen) {
  const bool round = outer >= 64 && outer < seqlen && outer % 16 <= 8;
  return round ? outer / 16 * 16 : outer;
}

TEST(FlashTimeTiles, HandValues) {
  // n = 4096, d = 128, M = 49152 (the default M of the project's machines). Forward: a = 2 d + 2,
  // b = 2 d; (M - 8 b) / (a + 8) = 177 rows fit next to an inner tile of 8 (12 chunks of 16 for
  // 11.06 full ones): 176 for time, 24 tiles either way.
  const HeadShape s{4096, 4096, 128, 128};
  EXPECT_EQ(flash_tiles(s, 49152, Pass::forward, FlashMasking::dense, kWords), (FlashTiles{177, 8, 0, 0}));
  EXPECT_EQ(flash_tiles(s, 49152, Pass::forward, FlashMasking::dense, kTime), (FlashTiles{176, 8, 0, 0}));
  // Backward: dQ nest 119 rows (last chunk 7 rows) -> 112; dK/dV nest 90 (last chunk 10) stays.
  EXPECT_EQ(flash_tiles(s, 49152, Pass::backward, FlashMasking::dense, kWords), (FlashTiles{119, 8, 8, 90}));
  EXPECT_EQ(flash_tiles(s, 49152, Pass::backward, FlashMasking::dense, kTime), (FlashTiles{112, 8, 8, 90}));
  // d = 8 (a = 18, b = 16), n = 1000: at M = 1948, outer_1 = (M - b) / (a + 1) = 101 takes an
  // inner tile of 8, next to which (M - 8 b) / (a + 8) = 70 rows fit: 64 for time (16 tiles
  // instead of 15). At M = 2182, 79 rows (last chunk 15) stay.
  const HeadShape small{1000, 1000, 8, 8};
  EXPECT_EQ(flash_tiles(small, 1948, Pass::forward, FlashMasking::dense, kWords), (FlashTiles{70, 8, 0, 0}));
  EXPECT_EQ(flash_tiles(small, 1948, Pass::forward, FlashMasking::dense, kTime), (FlashTiles{64, 8, 0, 0}));
  EXPECT_EQ(flash_tiles(small, 2182, Pass::forward, FlashMasking::dense, kTime), (FlashTiles{79, 8, 0, 0}));
  // Below 64 rows both objectives take what fits (d = 64, M = 4096: 30 x 1); a whole sequence
  // stays whole (100 rows, not 96).
  const HeadShape mid{4096, 4096, 64, 64};
  EXPECT_EQ(flash_tiles(mid, 4096, Pass::forward, FlashMasking::dense, kTime), (FlashTiles{30, 1, 0, 0}));
  EXPECT_EQ(flash_tiles(HeadShape{100, 100, 8, 8}, 1000000, Pass::forward, FlashMasking::dense, kTime).block_q, 100);
  // The words rule is the default.
  EXPECT_EQ(flash_tiles(s, 49152, Pass::forward), flash_tiles(s, 49152, Pass::forward, FlashMasking::dense, kWords));
}

TEST(FlashTimeTiles, EveryNestRoundsItsWordsTileByTheRuleAtEveryCacheSize) {
  for (const HeadShape& s : {HeadShape{1000, 1000, 8, 8}, HeadShape{700, 900, 40, 24}, HeadShape{300, 2000, 3, 17}}) {
    for (const FlashMasking masking : {FlashMasking::dense, FlashMasking::block_sparse}) {
      for (int64_t m = flash_min_cache_words(s, Pass::backward, masking, true); m < 60000; m += 13) {
        const std::string where = describe(s, m);
        const FlashTiles fw = flash_tiles(s, m, Pass::forward, masking, kWords);
        const FlashTiles ft = flash_tiles(s, m, Pass::forward, masking, kTime);
        ASSERT_EQ(ft, (FlashTiles{rounded(fw.block_q, s.seqlen_q), fw.block_k, 0, 0})) << where;
        const FlashTiles bw = flash_tiles(s, m, Pass::backward, masking, kWords);
        const FlashTiles bt = flash_tiles(s, m, Pass::backward, masking, kTime);
        ASSERT_EQ(bt, (FlashTiles{rounded(bw.block_q, s.seqlen_q), bw.block_k, bw.dkdv_block_q,
                                  rounded(bw.dkdv_block_k, s.seqlen_k)}))
            << where;
        FlashTiles uw = fused_flash_tiles(s, m, masking, kWords);
        const FlashTiles ut = fused_flash_tiles(s, m, masking, kTime);
        uw.dkdv_block_k = rounded(uw.dkdv_block_k, s.seqlen_k);
        ASSERT_EQ(ut, uw) << where;
        ASSERT_LE(flash_resident_words(s, ft, Pass::forward, masking), m) << where;
        ASSERT_LE(flash_resident_words(s, bt, Pass::backward, masking), m) << where;
      }
    }
  }
}

TEST(FlashTimeTiles, CountedEqualsPredictedWithTheRoundedTiles) {
  // n = 257 and rectangular, d = 8: M from 1948 to 6000 gives outer tiles of 64 to 250 rows, most
  // of them rounded.
  for (const HeadShape& s : {HeadShape{257, 257, 8, 8}, HeadShape{300, 97, 8, 24}}) {
    HeadFixture head(s);
    int rounded_tiles = 0;
    for (int64_t m = 1948; m <= 6000; m += 509) {
      SCOPED_TRACE(describe(s, m));
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        const bool fwd = pass == Pass::forward;
        const FlashTiles t = flash_tiles(s, m, pass, FlashMasking::dense, kTime);
        const Ledger ledger = fwd ? spattn::testing::count_flash_forward(head, t, m)
                                  : spattn::testing::count_flash_backward(head, t, m);
        const int64_t L = ledger.line_words();
        EXPECT_EQ((IoCount{ledger.reads(), ledger.writes()}),
                  fwd ? predict_flash_forward(s, t) : predict_flash_backward(s, t));
        const auto lines = ledger.total_lines();
        EXPECT_EQ((IoCount{lines.reads, lines.writes}),
                  fwd ? predict_dense_forward_lines(s, t, L) : predict_dense_backward_lines(s, t, L));
        EXPECT_LE(ledger.peak_resident(), m);
        rounded_tiles += !(t == flash_tiles(s, m, pass));
      }
    }
    EXPECT_GT(rounded_tiles, 0) << "no M rounded a tile: the test checks nothing new";
  }
}

TEST(FlashTimeTiles, ThePlannerTakesThemForTimeOnly) {
  const spattn::bounds::DenseShape shape{4096, 4096, 128, 128};
  const spattn::Mask full = spattn::Mask::full(4096, 4096);
  spattn::HeadPlanOptions options;
  options.cache_words = 49152;
  options.algorithm = spattn::Algorithm::flash;
  options.objective = kTime;
  const spattn::Plan time_plan = spattn::plan_heads(shape, full, Pass::forward, options);
  options.objective = kWords;
  const spattn::Plan words_plan = spattn::plan_heads(shape, full, Pass::forward, options);
  EXPECT_EQ(time_plan.flash.tiles, "block_q 176, block_k 8");
  EXPECT_EQ(words_plan.flash.tiles, "block_q 177, block_k 8");
  // 24 query tiles either way: the same words.
  EXPECT_EQ(time_plan.total(), words_plan.total());
}

}  // namespace
