// mask_stats from CSR and from a BSR mask, checked by hand and against each other.
#include <gtest/gtest.h>

#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using sparse_formats::BsrMask;
using sparse_formats::CsrPattern;
using sparse_formats::MaskStats;

// The 5 x 5 mask (2 x 2 blocks: (0,0) full, (0,1) (0,2) (1,1) (2,0) partial, (2,2) full):
//   row 0: 1 1 . . 1
//   row 1: 1 1 . 1 .
//   row 2: . . . . .
//   row 3: . . 1 1 .
//   row 4: 1 . . . 1
CsrPattern<int32_t> hand_pattern() {
  return CsrPattern<int32_t>(5, 5, {0, 3, 6, 6, 8, 10}, {0, 1, 4, 0, 1, 3, 2, 3, 0, 4});
}

TEST(FormatsStats, CsrByHand) {
  const MaskStats s = sparse_formats::mask_stats(hand_pattern().view());
  EXPECT_EQ(s.num_rows, 5);
  EXPECT_EQ(s.num_cols, 5);
  EXPECT_EQ(s.nnz, 10);
  EXPECT_DOUBLE_EQ(s.density, 0.4);
  EXPECT_EQ(s.empty_rows, 1);
  EXPECT_EQ(s.max_row_length, 3);
  EXPECT_EQ(s.block_m, 0);
  EXPECT_EQ(s.stored_blocks, 0);
  EXPECT_EQ(s.block_density, 0.0);
}

TEST(FormatsStats, BsrMaskByHand) {
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 2, 2);
  const MaskStats s = sparse_formats::mask_stats(mask);
  EXPECT_EQ(s.num_rows, 5);
  EXPECT_EQ(s.num_cols, 5);
  EXPECT_EQ(s.nnz, 10);
  EXPECT_DOUBLE_EQ(s.density, 0.4);
  EXPECT_EQ(s.empty_rows, 1);
  EXPECT_EQ(s.max_row_length, 3);
  EXPECT_EQ(s.block_m, 2);
  EXPECT_EQ(s.block_n, 2);
  EXPECT_EQ(s.stored_blocks, 6);
  EXPECT_EQ(s.full_blocks, 2);
  EXPECT_EQ(s.partial_blocks, 4);
  EXPECT_DOUBLE_EQ(s.block_density, 6.0 / 9.0);
  EXPECT_EQ(s.empty_block_rows, 0);
}

TEST(FormatsStats, EmptyBlockRowsAndRowsOfA4x6Mask) {
  // Rows 2 and 3 empty: with 2 x 4 blocks, block row 1 is empty; 3 entries in block (0, 0).
  const CsrPattern<int64_t> p(4, 6, {0, 2, 3, 3, 3}, {0, 1, 1});
  const MaskStats s = sparse_formats::mask_stats(sparse_formats::csr_to_bsr_mask(p.view(), 2, 4));
  EXPECT_EQ(s.nnz, 3);
  EXPECT_DOUBLE_EQ(s.density, 3.0 / 24.0);
  EXPECT_EQ(s.empty_rows, 2);
  EXPECT_EQ(s.max_row_length, 2);
  EXPECT_EQ(s.stored_blocks, 1);
  EXPECT_EQ(s.partial_blocks, 1);
  EXPECT_EQ(s.full_blocks, 0);
  EXPECT_DOUBLE_EQ(s.block_density, 1.0 / 4.0);
  EXPECT_EQ(s.empty_block_rows, 1);
}

TEST(FormatsStats, EmptyShapesHaveZeroDensity) {
  for (const auto& shape : {std::vector<int64_t>{0, 0}, {0, 3}, {3, 0}}) {
    const CsrPattern<int32_t> p = CsrPattern<int32_t>::empty(shape[0], shape[1]);
    const MaskStats s = sparse_formats::mask_stats(p.view());
    EXPECT_EQ(s.density, 0.0);
    EXPECT_EQ(s.empty_rows, shape[0]);
    const MaskStats b = sparse_formats::mask_stats(sparse_formats::csr_to_bsr_mask(p.view(), 4, 4));
    EXPECT_EQ(b.density, 0.0);
    EXPECT_EQ(b.block_density, 0.0);
    EXPECT_EQ(b.empty_rows, shape[0]);
  }
}

TEST(FormatsStats, BsrElementStatsMatchCsrOnRandomMasks) {
  uint64_t seed = 900;
  for (const auto& block : {std::vector<int64_t>{1, 1}, {3, 5}, {16, 16}, {64, 8}}) {
    for (const formats_testing::Shape kind :
         {formats_testing::Shape::random, formats_testing::Shape::causal}) {
      const std::vector<uint8_t> dense = formats_testing::make_mask(257, 97, kind, 0.05, seed++);
      const CsrPattern<int32_t> p =
          sparse_formats::dense_to_csr_pattern<int32_t>(dense.data(), 257, 97);
      const MaskStats from_csr = sparse_formats::mask_stats(p.view());
      const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(p.view(), block[0], block[1]);
      const MaskStats from_bsr = sparse_formats::mask_stats(mask);
      ASSERT_GT(from_csr.nnz, 0);
      EXPECT_EQ(from_bsr.nnz, from_csr.nnz);
      EXPECT_DOUBLE_EQ(from_bsr.density, from_csr.density);
      EXPECT_EQ(from_bsr.empty_rows, from_csr.empty_rows);
      EXPECT_EQ(from_bsr.max_row_length, from_csr.max_row_length);
      EXPECT_EQ(from_bsr.stored_blocks, mask.blocks.num_blocks());
      EXPECT_EQ(from_bsr.full_blocks + from_bsr.partial_blocks, from_bsr.stored_blocks);
      EXPECT_EQ(from_bsr.partial_blocks, mask.num_partial());
    }
  }
}

}  // namespace
