// The FlashMask a block-sparse flash run takes: int32 and int64 masks give the same tile lists, and
// a mask of the wrong shape, or a FlashMask built for other tiles, another pass or another shape,
// is refused before anything is written. Numerics: block_sparse_flash_test.cpp.
#include "support/flash_runs.hpp"
#include "support/head_fixture.hpp"
#include "support/reference_fixtures.hpp"

#include <sparse_formats/patterns.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>

namespace {

using namespace spattn::schedules;
using spattn::testing::HeadFixture;
using spattn::testing::pattern_of;
using spattn::testing::run_flash_backward;
using spattn::testing::run_flash_forward;
using ::testing::HasSubstr;
using Mask = sparse_formats::CsrPattern<int64_t>;

TEST(BlockSparseFlash, Int32AndInt64MasksGiveTheSameFlashMask) {
  const auto mask32 = sparse_formats::make_pattern<int32_t>(sparse_formats::parse_pattern_spec("bigbird:block=16"), 97, 257);
  const Mask mask64 = pattern_of("bigbird:block=16", 97, 257);
  const FlashTiles tiles{9, 4, 5, 11};
  const FlashMask a = build_flash_mask(mask32.view(), 97, 257, tiles, Pass::backward);
  const FlashMask b = build_flash_mask(mask64.view(), 97, 257, tiles, Pass::backward);
  for (const auto* lists : {&a.query_rows, &a.key_cols}) {
    const FlashTileLists& other = lists == &a.query_rows ? b.query_rows : b.key_cols;
    EXPECT_TRUE(*lists == other);
  }
  EXPECT_EQ(a.query_rows.num_outer_tiles(), 11);  // ceil(97 / 9)
  EXPECT_EQ(a.key_cols.num_outer_tiles(), 24);    // ceil(257 / 11)
  EXPECT_EQ(a.key_cols.bit_words, 1);             // 11 * 5 = 55 bits
  EXPECT_EQ(a.nnz, mask64.nnz());
}

// ---- Refusals: each names the argument and the values, and nothing is written -----------------

TEST(BlockSparseFlash, RefusesAMaskOfTheWrongShapeOrTiles) {
  const Mask mask = pattern_of("causal", 7, 5);
  EXPECT_THAT([&] { build_flash_mask(mask.view(), 7, 6, FlashTiles{2, 2, 0, 0}, Pass::forward); },
              ::testing::ThrowsMessage<spattn::InvalidArgument>(
                  HasSubstr("build_flash_mask: mask is 7 x 5, expected 7 x 6 (seqlen_q x seqlen_k)")));
  EXPECT_THAT([&] { build_flash_mask(mask.view(), 7, 5, FlashTiles{2, 2, 0, 3}, Pass::backward); },
              ::testing::ThrowsMessage<spattn::InvalidArgument>(
                  HasSubstr("build_flash_mask: tile dkdv_block_q = 0 rows must be positive")));
}

// A FlashMask built for other tiles, another pass or shape cannot come from a plan (the plan hands
// the tiles and the mask re-blocked at them out together), so the schedule and the prediction
// assert it: a caller's bug, not bad input. The matching mask runs.
TEST(BlockSparseFlashDeathTest, AFlashMaskBuiltForOtherTilesPassOrShapeIsAssertedAgainst) {
  const HeadShape shape{7, 5, 4, 4};
  const HeadFixture head(shape, 1);
  const Mask mask = pattern_of("causal", 7, 5);
  const FlashTiles tiles{2, 2, 2, 2};
  const FlashMask fwd_mask = build_flash_mask(mask.view(), 7, 5, tiles, Pass::forward);
  HeadFixture run = head;
  run_flash_forward(run, tiles, 10000, &fwd_mask);
  EXPECT_FALSE(std::isnan(run.o.front()));
#ifdef NDEBUG
  GTEST_SKIP() << "the schedules assert their masks; asserts are off in this build (NDEBUG)";
#else
  const FlashMask other_tiles = build_flash_mask(mask.view(), 7, 5, FlashTiles{3, 2, 0, 0}, Pass::forward);
  const Mask bigger = pattern_of("causal", 8, 5);
  const FlashMask other_shape = build_flash_mask(bigger.view(), 8, 5, tiles, Pass::forward);
  EXPECT_DEATH({ HeadFixture r = head; run_flash_forward(r, tiles, 10000, &other_tiles); },
               "flash mask built for other tiles");
  EXPECT_DEATH({ HeadFixture r = head; run_flash_forward(r, tiles, 10000, &other_shape); },
               "flash mask of another shape");
  EXPECT_DEATH(run_flash_backward(run, tiles, 10000, &fwd_mask), "flash mask built for the other pass");
  EXPECT_DEATH(predict_flash_backward(shape, tiles, &fwd_mask), "flash mask built for the other pass");
#endif
}

}  // namespace
