// validate() on BSR patterns, masks and matrices: one test per rejected defect.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sparse_formats/bsr.hpp>
#include <sparse_formats/validate.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using formats_testing::throws_with;
using sparse_formats::BlockKind;
using sparse_formats::BsrMask;
using sparse_formats::BsrMatrix;
using sparse_formats::BsrPattern;
using sparse_formats::validate;

constexpr BlockKind F = BlockKind::full;
constexpr BlockKind P = BlockKind::partial;

// The 5 x 5 mask of formats_bsr_test in 2 x 2 blocks (3 x 3 block grid, edge blocks 1 wide/high):
//   row 0: 1 1 | . . | 1        block (0,0) full,    (0,1) partial bits {3}, (0,2) partial {0}
//   row 1: 1 1 | . 1 | .
//   row 2: . . | . . | .        block (1,1) partial bits {2, 3}
//   row 3: . . | 1 1 | .
//   row 4: 1 . | . . | 1        block (2,0) partial bits {0}, (2,2) full (its 1 x 1 in-range part)
BsrMask<int32_t> hand_mask() {
  BsrMask<int32_t> mask;
  mask.blocks.num_rows = 5;
  mask.blocks.num_cols = 5;
  mask.blocks.block_m = 2;
  mask.blocks.block_n = 2;
  mask.blocks.block_row_ptr = {0, 3, 4, 6};
  mask.blocks.block_col_idx = {0, 1, 2, 1, 0, 2};
  mask.kind = {F, P, P, P, P, F};
  mask.partial_slot = {-1, 0, 1, 2, 3, -1};
  mask.partial_bits = {0b1000, 0b0001, 0b1100, 0b0001};
  return mask;
}

BsrMatrix<int64_t, float> hand_matrix() {
  BsrMatrix<int64_t, float> m;
  m.blocks.num_rows = 5;
  m.blocks.num_cols = 5;
  m.blocks.block_m = 2;
  m.blocks.block_n = 2;
  m.blocks.block_row_ptr = {0, 3, 4, 6};
  m.blocks.block_col_idx = {0, 1, 2, 1, 0, 2};
  m.values = {1, 2, 4, 5, 0, 0, 0, 6, 3, 0, 0, 0, 0, 0, 7, 8, 9, 0, 0, 0, 10, 0, 0, 0};
  return m;
}

TEST(FormatsValidateBsr, AcceptsValidStructures) {
  EXPECT_NO_THROW(validate(hand_mask().blocks, "blocks"));
  EXPECT_NO_THROW(validate(hand_mask(), "mask"));
  EXPECT_NO_THROW(validate(hand_matrix(), "k"));
  EXPECT_NO_THROW(validate(BsrPattern<int64_t>(), "blocks"));  // 0 x 0
  EXPECT_NO_THROW(validate(BsrMask<int32_t>(), "mask"));
}

TEST(FormatsValidateBsr, RejectsBlockMBelowOne) {
  BsrMask<int32_t> mask = hand_mask();
  mask.blocks.block_m = 0;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); }, {"mask: block_m = 0 must be >= 1"}));
}

TEST(FormatsValidateBsr, RejectsBlockNBelowOne) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_n = -2;
  EXPECT_TRUE(
      throws_with([&] { validate(blocks, "blocks"); }, {"blocks: block_n = -2 must be >= 1"}));
}

TEST(FormatsValidateBsr, RejectsBlockRowPtrOfWrongLength) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_m = 1;  // 5 block rows now, but block_row_ptr still has 4 entries
  EXPECT_TRUE(
      throws_with([&] { validate(blocks, "blocks"); },
                  {"blocks: block_row_ptr has 4 entries, expected num_block_rows + 1 = 6"}));
}

TEST(FormatsValidateBsr, RejectsDecreasingBlockRowPtr) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_row_ptr = {0, 3, 2, 6};
  EXPECT_TRUE(throws_with([&] { validate(blocks, "blocks"); },
                          {"blocks: block_row_ptr[2] = 2 < block_row_ptr[1] = 3"}));
}

TEST(FormatsValidateBsr, RejectsBlockRowPtrEndOtherThanNumBlocks) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_col_idx.push_back(2);
  EXPECT_TRUE(throws_with([&] { validate(blocks, "blocks"); },
                          {"blocks: block_row_ptr[3] = 6 but block_col_idx has 7 entries"}));
}

TEST(FormatsValidateBsr, RejectsBlockColumnOutOfRange) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_col_idx[2] = 3;  // 5 columns in blocks of 2: block columns 0..2
  EXPECT_TRUE(throws_with([&] { validate(blocks, "blocks"); },
                          {"blocks: block_col_idx[2] = 3 is out of range [0, 3) (block row 0)"}));
}

TEST(FormatsValidateBsr, RejectsDuplicateBlockColumn) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_col_idx[5] = 0;  // block row 2: {0, 0}
  EXPECT_TRUE(throws_with(
      [&] { validate(blocks, "blocks"); },
      {"blocks: block_col_idx[5] = 0 repeats block_col_idx[4] (duplicate column in block row 2)"}));
}

TEST(FormatsValidateBsr, RejectsUnsortedBlockColumns) {
  BsrPattern<int32_t> blocks = hand_mask().blocks;
  blocks.block_col_idx = {0, 2, 1, 1, 0, 2};
  EXPECT_TRUE(
      throws_with([&] { validate(blocks, "blocks"); },
                  {"blocks: block_col_idx[2] = 1 < block_col_idx[1] = 2", "within block row 0"}));
}

TEST(FormatsValidateBsr, RejectsKindOfWrongSize) {
  BsrMask<int32_t> mask = hand_mask();
  mask.kind.pop_back();
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: kind has 5 entries, expected num_blocks = 6"}));
}

TEST(FormatsValidateBsr, RejectsPartialSlotOfWrongSize) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_slot.push_back(-1);
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial_slot has 7 entries, expected num_blocks = 6"}));
}

TEST(FormatsValidateBsr, RejectsUnknownKind) {
  BsrMask<int32_t> mask = hand_mask();
  mask.kind[2] = static_cast<BlockKind>(7);
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: kind[2] = 7 is neither full (0) nor partial (1)"}));
}

TEST(FormatsValidateBsr, RejectsFullBlockWithASlot) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_slot[5] = 2;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial_slot[5] = 2 but block 5 is full (expected -1)"}));
}

TEST(FormatsValidateBsr, RejectsPartialSlotOutOfRange) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_slot[1] = 4;
  EXPECT_TRUE(
      throws_with([&] { validate(mask, "mask"); },
                  {"mask: partial_slot[1] = 4 is out of range [0, 4) (block 1 is partial)"}));
  mask.partial_slot[1] = -1;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial_slot[1] = -1 is out of range [0, 4)"}));
}

TEST(FormatsValidateBsr, RejectsPartialSlotUsedTwice) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_slot[3] = 0;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial_slot[3] = 0 is also used by block 1"}));
}

TEST(FormatsValidateBsr, RejectsPartialBitsOfWrongSize) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits.pop_back();
  EXPECT_TRUE(throws_with(
      [&] { validate(mask, "mask"); },
      {"mask: partial_bits has 3 words, expected 4 partial blocks * 1 words_per_block = 4"}));
}

TEST(FormatsValidateBsr, RejectsBitPastTheRightEdge) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits[1] = 0b0011;  // block (0, 2) covers one column; bit 1 is column 5
  EXPECT_TRUE(throws_with(
      [&] { validate(mask, "mask"); },
      {"mask: partial block 2 (block row 0, block col 2) sets element (0, 1) of the block, beyond "
       "the matrix edge (the block covers 2 x 1 elements)"}));
}

TEST(FormatsValidateBsr, RejectsBitPastTheBottomEdge) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits[3] = 0b0101;  // block (2, 0) covers one row; bit 2 is row 5
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial block 4 (block row 2, block col 0) sets element (1, 0)",
                           "covers 1 x 2 elements"}));
}

TEST(FormatsValidateBsr, RejectsPaddingBitsPastTheBlock) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits[2] |= uint64_t{1} << 5;  // a 2 x 2 block has bits 0..3
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial block 3 (block row 1, block col 1) sets bit 5, beyond "
                           "block_m * block_n = 4"}));
}

TEST(FormatsValidateBsr, RejectsPartialBlockWithNoElement) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits[0] = 0;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial block 1 (block row 0, block col 1) sets no element"}));
}

TEST(FormatsValidateBsr, RejectsPartialBlockWithEveryElementSet) {
  BsrMask<int32_t> mask = hand_mask();
  mask.partial_bits[2] = 0b1111;
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: partial block 3 (block row 1, block col 1) sets all 4 in-range "
                           "elements; kind[3] must be full"}));
}

TEST(FormatsValidateBsr, RejectsBlockAreaOverflowingInt64) {
  BsrMask<int64_t> mask;
  mask.blocks.num_rows = 5;
  mask.blocks.num_cols = 5;
  mask.blocks.block_m = int64_t{1} << 32;
  mask.blocks.block_n = int64_t{1} << 32;
  mask.blocks.block_row_ptr = {0, 0};
  EXPECT_TRUE(throws_with([&] { validate(mask, "mask"); },
                          {"mask: block_m * block_n = 4294967296 * 4294967296 overflows int64"}));
  EXPECT_NO_THROW(validate(mask.blocks, "blocks"));  // a pattern needs no area
}

TEST(FormatsValidateBsr, RejectsMatrixValuesOfWrongSize) {
  BsrMatrix<int64_t, float> m = hand_matrix();
  m.values.resize(20);
  EXPECT_TRUE(throws_with([&] { validate(m, "k"); },
                          {"k: values has 20 entries, expected num_blocks * block_m * block_n = "
                           "6 * 2 * 2 = 24"}));
}

TEST(FormatsValidateBsr, RejectsNonFiniteMatrixValue) {
  BsrMatrix<int64_t, float> m = hand_matrix();
  m.values[13] = std::numeric_limits<float>::quiet_NaN();  // block 3, element (0, 1)
  EXPECT_TRUE(throws_with([&] { validate(m, "k"); },
                          {"k: values[13] = nan is not finite (block 3, element (0, 1))"}));
}

TEST(FormatsValidateBsr, RejectsNonzeroValueBeyondTheEdge) {
  BsrMatrix<int64_t, float> m = hand_matrix();
  m.values[9] = 2.5f;  // block 2 = (0, 2): element (0, 1) lies in column 5
  EXPECT_TRUE(
      throws_with([&] { validate(m, "k"); },
                  {"k: values[9] = 2.5 is element (0, 1) of block 2 (block row 0, block col "
                   "2), beyond the matrix edge (must be 0"}));
}

}  // namespace
