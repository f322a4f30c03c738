// The tile records the plan carries compare every field and print what they hold, so that a test
// comparing two plans' tiles says which tiles differ; the plan's text of its tiles is that printing.
#include "plan/planned_run.hpp"
#include "schedules/common/tiled_matmul.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace {

using namespace spattn::schedules;

template <typename T>
std::string text_of(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

TEST(TileRecords, PrintWhatTheyHold) {
  EXPECT_EQ(text_of(FlashTiles{64, 16, 8, 128}), "block_q 64, block_k 16, dkdv_block_q 8, dkdv_block_k 128");
  EXPECT_EQ(text_of(FlashTiles{64, 16, 0, 0}), "block_q 64, block_k 16");  // a forward's
  EXPECT_EQ(text_of(FlashTiles{381, 0, 16, 130, true}),
            "block_q 381, dkdv_block_q 16, dkdv_block_k 130, dQ in the dK/dV pass");  // one-loop backward
  MatmulTiles product{32, 16, 8, 0, false, false};
  EXPECT_EQ(text_of(product), "32 x 16, chunk 8");
  product.carry_line_words = 16;
  product.carry_b = true;
  EXPECT_EQ(text_of(product), "32 x 16, chunk 8, carry 16 B");
  EXPECT_EQ(text_of(HeadShape{7, 97, 64, 40}), "7 x 97, head_dim 64, head_dim_v 40");

  SmallCacheTiles dense;
  dense.shape = {7, 97, 64, 40};
  dense.cache_words = 4096;
  dense.line_words = 16;
  dense.scores = {2, 3, 4, 0, false, false};
  dense.output = {5, 6, 7, 0, false, false};
  EXPECT_EQ(text_of(dense),
            "small_cache forward tiles for 7 x 97, head_dim 64, head_dim_v 40, M 4096, L 16: S 2 x 3, chunk 4; O 5 x 6, "
            "chunk 7");

  SparseSmallCacheTiles sparse;
  sparse.pass = spattn::Pass::backward;
  sparse.shape = {1, 1, 8, 8};
  sparse.nnz = 1;
  sparse.cache_words = 100;
  sparse.line_words = 1;
  EXPECT_EQ(text_of(sparse.dq), "rows 1 x cols 1, chunk 1");  // a run of 1 is no run
  sparse.dq.run = 16;
  EXPECT_EQ(text_of(sparse.dq), "rows 1 x cols 1, chunk 1, run 16");
  EXPECT_EQ(text_of(sparse).rfind("density-adaptive small_cache backward tiles for 1 x 1, head_dim 8, head_dim_v 8, "
                                  "1 mask entries, M 100, L 1: P rows 1",
                                  0),
            0u)
      << text_of(sparse);
}

// Equality covers every field: tiles chosen for another line size, or with another carry, would
// move other lines, so they are other tiles.
TEST(TileRecords, EqualityComparesEveryField) {
  const MatmulTiles product{32, 16, 8, 16, true, false};
  MatmulTiles other = product;
  EXPECT_EQ(product, other);
  other.carry_a = false;
  EXPECT_FALSE(product == other);
  other = product;
  other.carry_line_words = 8;
  EXPECT_FALSE(product == other);

  SmallCacheTiles a;
  a.line_words = 16;
  SmallCacheTiles b = a;
  EXPECT_EQ(a, b);
  b.line_words = 1;
  EXPECT_FALSE(a == b);
  b = a;
  b.dk.carry_b = true;
  EXPECT_FALSE(a == b);

  SparseSmallCacheTiles c;
  SparseSmallCacheTiles d = c;
  EXPECT_EQ(c, d);
  d.line_words = 16;
  EXPECT_FALSE(c == d);
  d = c;
  d.shape.head_dim_v = 3;
  EXPECT_FALSE(c == d);
}

TEST(TileRecords, ThePlansTextOfItsTilesIsTheRecordsPrinting) {
  using spattn::Algorithm;
  using spattn::Mask;
  using spattn::Pass;
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    for (const char* spec : {"full", "causal"}) {
      SCOPED_TRACE(std::string(spec) + (pass == Pass::forward ? " forward" : " backward"));
      const Mask mask = std::string(spec) == "full" ? Mask::full(97, 97) : Mask::from_spec(spec, 97, 97);
      for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
        spattn::HeadPlanOptions options;
        options.cache_words = 3000;
        options.algorithm = algorithm;
        const spattn::Plan plan = spattn::plan_heads({97, 97, 16, 16}, mask, pass, options);
        const spattn::detail::PlannedGroup& group = plan.run->groups.at(0);
        std::ostringstream expected;
        if (algorithm == Algorithm::flash) {
          expected << group.flash_tiles;
          EXPECT_EQ(plan.flash.tiles.rfind(expected.str(), 0), 0u) << plan.flash.tiles;
          EXPECT_EQ(plan.flash.tiles.find("dkdv_block_q") != std::string::npos, pass == Pass::backward);
        } else if (mask.is_full()) {
          print_tile_list(expected, group.small_cache_tiles);
          EXPECT_EQ(plan.small_cache.tiles, expected.str());
        } else {
          print_tile_list(expected, group.sparse_small_cache_tiles);
          EXPECT_EQ(plan.small_cache.tiles, expected.str());
        }
        EXPECT_FALSE(expected.str().empty());
      }
    }
  }
}

}  // namespace
