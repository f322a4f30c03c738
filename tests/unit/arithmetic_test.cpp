// The schedules' arithmetic (schedules/flash/flash_flops.hpp, small_cache_flops, plan/price.hpp), what the time objective prices: flash's
// flops over the pairs of its visited tiles and the pairs of its partial tiles, hand-counted on
// 5 x 5 masks, and small_cache's per pair or entry.
#include "plan/price.hpp"
#include "schedules/flash/flash_flops.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <spattn/mask.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

using spattn::Mask;
using spattn::Pass;
using namespace spattn::schedules;
using spattn::plan_detail::saturated_price;

FlashMask flash_mask_of(const Mask& mask, const FlashTiles& tiles, Pass pass) {
  return build_flash_mask(mask.csr(), mask.seqlen_q(), mask.seqlen_k(), tiles, pass);
}

// The diagonal with 2 x 2 tiles: query tiles {0, 1}, {2, 3}, {4} each visit their own key tile,
// 2 x 2 + 2 x 2 + 1 x 1 = 9 pairs per direction.
TEST(Arithmetic, DiagonalVisitsTheDiagonalTilesOnly) {
  const Mask diagonal = Mask::from_spec("sliding_window:w=0", 5, 5);
  ASSERT_EQ(diagonal.nnz(), 5);
  const FlashTiles tiles{2, 2, 2, 2};
  const FlashMask mask = flash_mask_of(diagonal, tiles, Pass::backward);
  EXPECT_EQ(stored_pairs(mask.query_rows), 9);
  EXPECT_EQ(stored_pairs(mask.key_cols), 9);
  const HeadShape shape{5, 5, 3, 2};
  const FlashMask forward = flash_mask_of(diagonal, tiles, Pass::forward);
  EXPECT_EQ(flash_flops(shape, &forward, Pass::forward), 2 * (3 + 2) * 9);
  EXPECT_EQ(flash_flops(shape, &mask, Pass::backward), (4 * 3 + 2 * 2) * 9 + 4 * (3 + 2) * 9);
  // The two 2 x 2 tiles hold 2 attended pairs of 4 (partial); {4} x {4} is whole.
  EXPECT_EQ(stored_pairs(mask.query_rows, true), 8);
  EXPECT_EQ(flash_partial_pairs(&forward, Pass::forward), 8);
  EXPECT_EQ(flash_partial_pairs(&mask, Pass::backward), 8 + 8);
  EXPECT_EQ(flash_partial_pairs(nullptr, Pass::backward), 0);
}

// Causal with 2 x 2 tiles for the forward and dQ nest: query tile {0, 1} visits key tile 0 (4
// pairs), {2, 3} key tiles 0 and 1 (8), {4} all three (2 + 2 + 1): 17. The dK/dV nest with 3-key
// by 2-query tiles: keys {0, 1, 2} meet query tiles {0, 1}, {2, 3}, {4} (6 + 6 + 3), keys {3, 4}
// query tiles {2, 3} and {4} (4 + 2): 21.
TEST(Arithmetic, CausalCountsEdgeTilesByTheirRealRowsAndColumns) {
  const Mask causal = Mask::from_spec("causal", 5, 5);
  const FlashTiles tiles{2, 2, 2, 3};  // block_q, block_k, dkdv_block_q, dkdv_block_k
  const FlashMask mask = flash_mask_of(causal, tiles, Pass::backward);
  EXPECT_EQ(stored_pairs(mask.query_rows), 17);
  EXPECT_EQ(stored_pairs(mask.key_cols), 21);
  const HeadShape shape{5, 5, 4, 4};
  EXPECT_EQ(flash_flops(shape, &mask, Pass::backward), (4 * 4 + 2 * 4) * 17 + 4 * (4 + 4) * 21);
  // Partial: the diagonal tiles {0, 1} x {0, 1} and {2, 3} x {2, 3} (4 + 4; {4} x {4} is whole);
  // keys {0, 1, 2} x queries {0, 1} (6) and keys {3, 4} x queries {2, 3} (4).
  EXPECT_EQ(flash_partial_pairs(&mask, Pass::backward), 8 + 10);
}

TEST(Arithmetic, DenseFlashAndSmallCacheCountEveryPair) {
  const HeadShape shape{7, 3, 4, 2};  // 21 pairs
  EXPECT_EQ(flash_flops(shape, nullptr, Pass::forward), 2 * (4 + 2) * 21);
  EXPECT_EQ(flash_flops(shape, nullptr, Pass::backward), (4 * 4 + 2 * 2) * 21 + 4 * (4 + 2) * 21);
  EXPECT_EQ(small_cache_flops(shape, 21, Pass::forward), 2 * (4 + 2) * 21);
  EXPECT_EQ(small_cache_flops(shape, 21, Pass::backward), (6 * 4 + 4 * 2) * 21);
  EXPECT_EQ(small_cache_flops(shape, 0, Pass::backward), 0);
}

// Prices are computed in double and saturate instead of wrapping (a wrapped price would flip
// auto's choice on a huge problem).
TEST(Arithmetic, PricesSaturateAtTheLargestInt64) {
  EXPECT_EQ(saturated_price(0.0), 0);
  EXPECT_EQ(saturated_price(2.4), 2);
  EXPECT_EQ(saturated_price(2.5), 3);
  EXPECT_EQ(saturated_price(-5.0), 0);
  EXPECT_EQ(saturated_price(1e15), 1000000000000000);
  EXPECT_EQ(saturated_price(1e19), INT64_MAX);
  EXPECT_EQ(saturated_price(std::nan("")), INT64_MAX);
}

}  // namespace
