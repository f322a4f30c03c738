// CSR <-> BSR: hand-checked blocks and classification, edge blocks, round trips over many shapes
// and block sizes against a dense oracle, and masks too large to ever densify.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <sparse_formats/validate.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using formats_testing::expect_same;
using formats_testing::throws_with;
using sparse_formats::BlockKind;
using sparse_formats::BsrMask;
using sparse_formats::BsrMatrix;
using sparse_formats::BsrPattern;
using sparse_formats::CsrMatrix;
using sparse_formats::CsrPattern;

constexpr BlockKind F = BlockKind::full;
constexpr BlockKind P = BlockKind::partial;

// The 5 x 5 mask (values 1..10 in row order for the valued tests), in 2 x 2 blocks:
//   row 0: 1 1 | . . | 1
//   row 1: 1 1 | . 1 | .
//   -------+-----+--
//   row 2: . . | . . | .
//   row 3: . . | 1 1 | .
//   -------+-----+--
//   row 4: 1 . | . . | 1
CsrPattern<int32_t> hand_pattern() {
  return CsrPattern<int32_t>(5, 5, {0, 3, 6, 6, 8, 10}, {0, 1, 4, 0, 1, 3, 2, 3, 0, 4});
}

TEST(FormatsBsr, MaskOfTheHandExample) {
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 2, 2);
  EXPECT_EQ(mask.blocks.block_row_ptr, (std::vector<int32_t>{0, 3, 4, 6}));
  EXPECT_EQ(mask.blocks.block_col_idx, (std::vector<int32_t>{0, 1, 2, 1, 0, 2}));
  // (0,0): 4 of 4 -> full. (0,1): 1 of 4. (0,2): 1 of its 2 x 1 in-range elements.
  // (1,1): 2 of 4. (2,0): 1 of its 1 x 2. (2,2): 1 of its 1 x 1 -> full.
  EXPECT_EQ(mask.kind, (std::vector<BlockKind>{F, P, P, P, P, F}));
  EXPECT_EQ(mask.partial_slot, (std::vector<int64_t>{-1, 0, 1, 2, 3, -1}));
  // Bit r * block_n + c: (1,1) -> 3; (0,0) -> 0; (1,0) and (1,1) -> 2, 3; (0,0) -> 0.
  EXPECT_EQ(mask.partial_bits, (std::vector<uint64_t>{0b1000, 0b0001, 0b1100, 0b0001}));
  EXPECT_TRUE(mask.contains(0, 1, 1));
  EXPECT_FALSE(mask.contains(1, 0, 0));
  sparse_formats::validate(mask, "mask");
  expect_same(sparse_formats::csr_to_bsr_pattern(hand_pattern().view(), 2, 2), mask.blocks);
  expect_same(sparse_formats::bsr_mask_to_csr(mask), hand_pattern());
}

TEST(FormatsBsr, MatrixOfTheHandExample) {
  CsrMatrix<int32_t, double> csr;
  csr.pattern = hand_pattern();
  csr.values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const BsrMatrix<int32_t, double> bsr = sparse_formats::csr_to_bsr(csr.view(), 2, 2);
  EXPECT_EQ(bsr.blocks.block_col_idx, (std::vector<int32_t>{0, 1, 2, 1, 0, 2}));
  // Row-major 2 x 2 blocks, zero padding beyond the edge.
  EXPECT_EQ(bsr.values, (std::vector<double>{1, 2, 4, 5, 0, 0, 0, 6, 3,  0, 0, 0,  //
                                             0, 0, 7, 8, 9, 0, 0, 0, 10, 0, 0, 0}));
  sparse_formats::validate(bsr, "bsr");
  const CsrMatrix<int32_t, double> back = sparse_formats::bsr_to_csr(bsr);
  expect_same(back.pattern, csr.pattern);
  EXPECT_EQ(back.values, csr.values);
}

TEST(FormatsBsr, NonSquareBlocksOfTheHandExample) {
  // 3 x 2 blocks: block rows {0-2, 3-4}, block columns {0-1, 2-3, 4}.
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 3, 2);
  EXPECT_EQ(mask.blocks.block_row_ptr, (std::vector<int32_t>{0, 3, 6}));
  EXPECT_EQ(mask.blocks.block_col_idx, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  // (0,0): 4 of 6. (0,1): 1 of 6, bit (1,1) = 3. (0,2): 1 of 3 x 1, bit (0,0) = 0.
  // (1,0): 1 of 2 x 2, bit (1,0) = 2. (1,1): 2 of 4, bits (0,0), (0,1). (1,2): 1 of 2 x 1, bit
  // (1,0).
  EXPECT_EQ(mask.kind, (std::vector<BlockKind>{P, P, P, P, P, P}));
  EXPECT_EQ(mask.partial_bits, (std::vector<uint64_t>{0b1111, 0b1000, 0b1, 0b100, 0b11, 0b100}));
  sparse_formats::validate(mask, "mask");
  expect_same(sparse_formats::bsr_mask_to_csr(mask), hand_pattern());
}

TEST(FormatsBsr, OneByOneBlocksAreAllFull) {
  const BsrMask<int64_t> mask = sparse_formats::csr_to_bsr_mask(
      sparse_formats::convert_index<int64_t>(hand_pattern().view()).view(), 1, 1);
  EXPECT_EQ(mask.blocks.num_blocks(), 10);
  EXPECT_EQ(std::count(mask.kind.begin(), mask.kind.end(), F), 10);
  EXPECT_TRUE(mask.partial_bits.empty());
  EXPECT_EQ(mask.blocks.block_col_idx, (std::vector<int64_t>{0, 1, 4, 0, 1, 3, 2, 3, 0, 4}));
}

TEST(FormatsBsr, BlockLargerThanTheMatrix) {
  // One 8 x 16 block covers the whole 5 x 5 matrix; 10 of its 25 in-range elements are set.
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 8, 16);
  EXPECT_EQ(mask.blocks.block_row_ptr, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(mask.blocks.block_col_idx, (std::vector<int32_t>{0}));
  EXPECT_EQ(mask.kind, (std::vector<BlockKind>{P}));
  ASSERT_EQ(mask.words_per_block(), 2);
  // Bits r * 16 + c: row 0 {0,1,4}, row 1 {16,17,19}, row 3 {50,51}, row 4 {64,68}.
  const uint64_t word0 = (1u << 0) | (1u << 1) | (1u << 4) | (1u << 16) | (1u << 17) | (1u << 19) |
                         (uint64_t{1} << 50) | (uint64_t{1} << 51);
  EXPECT_EQ(mask.partial_bits, (std::vector<uint64_t>{word0, 0b10001}));
  sparse_formats::validate(mask, "mask");
  expect_same(sparse_formats::bsr_mask_to_csr(mask), hand_pattern());
  // A dense 5 x 5 in one 8 x 16 block is full: full means every in-range element.
  const std::vector<uint8_t> ones(25, 1);
  const BsrMask<int32_t> full = sparse_formats::csr_to_bsr_mask(
      sparse_formats::dense_to_csr_pattern<int32_t>(ones.data(), 5, 5).view(), 8, 16);
  EXPECT_EQ(full.kind, (std::vector<BlockKind>{F}));
}

TEST(FormatsBsr, RejectsBlockSizesBelowOne) {
  const CsrPattern<int32_t> p = hand_pattern();
  EXPECT_TRUE(throws_with([&] { sparse_formats::csr_to_bsr_mask(p.view(), 0, 2); },
                          {"csr_to_bsr_mask: block_m = 0 must be >= 1"}));
  EXPECT_TRUE(throws_with([&] { sparse_formats::csr_to_bsr_pattern(p.view(), 2, -1); },
                          {"csr_to_bsr_pattern: block_n = -1 must be >= 1"}));
  CsrMatrix<int32_t, float> m;
  m.pattern = p;
  m.values.assign(10, 1.0f);
  EXPECT_TRUE(throws_with([&] { sparse_formats::csr_to_bsr(m.view(), 2, 0); },
                          {"csr_to_bsr: block_n = 0 must be >= 1"}));
}

TEST(FormatsBsr, ConversionsRejectArraysOfInconsistentLength) {
  // Conversions trust contents but check lengths, so that a malformed input cannot read past an
  // array.
  BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 2, 2);
  mask.kind.pop_back();
  EXPECT_TRUE(throws_with([&] { sparse_formats::bsr_mask_to_csr(mask); },
                          {"bsr_mask_to_csr: kind has 5 and partial_slot 6 entries, expected "
                           "num_blocks = 6"}));
  mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 2, 2);
  mask.blocks.block_col_idx.pop_back();
  EXPECT_TRUE(throws_with([&] { sparse_formats::mask_stats(mask); },
                          {"mask_stats: block_row_ptr[3] = 6 but block_col_idx has 5 entries"}));
  mask = sparse_formats::csr_to_bsr_mask(hand_pattern().view(), 2, 2);
  mask.partial_bits.push_back(0);
  EXPECT_TRUE(throws_with([&] { sparse_formats::transpose(mask); },
                          {"transpose: partial_bits has 5 words, expected 4"}));

  CsrMatrix<int32_t, float> csr;
  csr.pattern = hand_pattern();
  csr.values.assign(10, 1.0f);
  BsrMatrix<int32_t, float> bsr = sparse_formats::csr_to_bsr(csr.view(), 2, 2);
  bsr.values.resize(20);
  EXPECT_TRUE(throws_with([&] { sparse_formats::bsr_to_csr(bsr); },
                          {"bsr_to_csr: values has 20 entries, expected 24"}));
  bsr.blocks.block_m = 1;
  EXPECT_TRUE(throws_with([&] { sparse_formats::transpose(bsr); },
                          {"transpose: block_row_ptr has 4 entries, expected num_block_rows + 1 = 6"}));
}

// The dense oracle: block (I, J) is stored iff it holds an entry, full iff it holds all of its
// in-range elements. Checks `mask` block by block against the dense mask.
void check_against_dense(const BsrMask<int32_t>& mask, const std::vector<uint8_t>& dense,
                         int64_t rows, int64_t cols) {
  const int64_t bm = mask.blocks.block_m;
  const int64_t bn = mask.blocks.block_n;
  const auto view = mask.blocks.view();
  int64_t b = 0;
  for (int64_t I = 0; I < view.num_block_rows(); ++I) {
    for (int64_t J = 0; J < view.num_block_cols(); ++J) {
      int64_t set = 0;
      for (int64_t r = I * bm; r < std::min(rows, (I + 1) * bm); ++r) {
        for (int64_t c = J * bn; c < std::min(cols, (J + 1) * bn); ++c) {
          set += dense[static_cast<size_t>(r * cols + c)];
        }
      }
      if (set == 0) continue;
      ASSERT_LT(b, mask.blocks.num_blocks());
      ASSERT_EQ(mask.blocks.block_col_idx[static_cast<size_t>(b)], J) << "block row " << I;
      const bool full = set == view.block_rows_in(I) * view.block_cols_in(J);
      EXPECT_EQ(mask.kind[static_cast<size_t>(b)], full ? F : P)
          << "block (" << I << ", " << J << ")";
      ++b;
    }
    ASSERT_EQ(mask.blocks.block_row_ptr[static_cast<size_t>(I + 1)], b);
  }
}

TEST(FormatsBsr, RoundTripsManyShapesAndBlockSizes) {
  const int64_t shapes[][2] = {{0, 0}, {1, 0},   {0, 1},   {1, 1},
                               {7, 7}, {97, 33}, {33, 97}, {257, 257}};
  const int64_t block_sizes[][2] = {{1, 1},  {1, 7},  {7, 1},   {2, 2},    {3, 5},
                                    {8, 16}, {16, 8}, {64, 64}, {300, 300}};
  const formats_testing::Shape kinds[] = {formats_testing::Shape::random,
                                          formats_testing::Shape::causal,
                                          formats_testing::Shape::block_dense};
  uint64_t seed = 100;
  int64_t full_seen = 0;
  int64_t partial_seen = 0;
  for (const auto& shape : shapes) {
    const int64_t rows = shape[0];
    const int64_t cols = shape[1];
    for (const formats_testing::Shape kind : kinds) {
      const std::vector<uint8_t> dense = formats_testing::make_mask(rows, cols, kind, 0.2, seed++);
      const std::vector<float> values = formats_testing::make_values<float>(dense, seed++);
      const CsrPattern<int32_t> csr =
          sparse_formats::dense_to_csr_pattern<int32_t>(dense.data(), rows, cols);
      const CsrMatrix<int32_t, float> matrix =
          sparse_formats::dense_to_csr<int32_t>(values.data(), rows, cols);
      for (const auto& block : block_sizes) {
        SCOPED_TRACE(testing::Message()
                     << rows << " x " << cols << ", shape " << static_cast<int>(kind) << ", blocks "
                     << block[0] << " x " << block[1]);
        const BsrMask<int32_t> mask =
            sparse_formats::csr_to_bsr_mask(csr.view(), block[0], block[1]);
        sparse_formats::validate(mask, "mask");
        check_against_dense(mask, dense, rows, cols);
        full_seen += std::count(mask.kind.begin(), mask.kind.end(), F);
        partial_seen += std::count(mask.kind.begin(), mask.kind.end(), P);
        expect_same(sparse_formats::csr_to_bsr_pattern(csr.view(), block[0], block[1]),
                    mask.blocks);
        const CsrPattern<int32_t> back = sparse_formats::bsr_mask_to_csr(mask);
        expect_same(back, csr);
        EXPECT_EQ(sparse_formats::csr_pattern_to_dense(back.view()), dense);

        const BsrMatrix<int32_t, float> bsr =
            sparse_formats::csr_to_bsr(matrix.view(), block[0], block[1]);
        sparse_formats::validate(bsr, "bsr");
        expect_same(bsr.blocks, mask.blocks);
        EXPECT_EQ(sparse_formats::csr_to_dense(sparse_formats::bsr_to_csr(bsr).view()), values);
      }
    }
  }
  // The patterns exercise both classifications many times over.
  EXPECT_GT(full_seen, 1000);
  EXPECT_GT(partial_seen, 1000);
}

TEST(FormatsBsr, Int64DoubleRoundTrip) {
  const std::vector<uint8_t> dense =
      formats_testing::make_mask(97, 33, formats_testing::Shape::causal, 0, 3);
  const std::vector<double> values = formats_testing::make_values<double>(dense, 4);
  const CsrMatrix<int64_t, double> csr =
      sparse_formats::dense_to_csr<int64_t>(values.data(), 97, 33);
  for (const int64_t block : {1, 4, 5, 13, 40}) {
    const BsrMatrix<int64_t, double> bsr = sparse_formats::csr_to_bsr(csr.view(), block, block + 1);
    sparse_formats::validate(bsr, "bsr");
    EXPECT_EQ(sparse_formats::csr_to_dense(sparse_formats::bsr_to_csr(bsr).view()), values);
    const BsrMask<int64_t> mask =
        sparse_formats::csr_to_bsr_mask(csr.pattern.view(), block, block + 1);
    sparse_formats::validate(mask, "mask");
    expect_same(sparse_formats::bsr_mask_to_csr(mask), csr.pattern);
  }
}

TEST(FormatsBsr, BsrToCsrDropsExplicitZerosInsideBlocks) {
  BsrMatrix<int32_t, float> bsr;
  bsr.blocks.num_rows = 2;
  bsr.blocks.num_cols = 3;
  bsr.blocks.block_m = 2;
  bsr.blocks.block_n = 2;
  bsr.blocks.block_row_ptr = {0, 2};
  bsr.blocks.block_col_idx = {0, 1};
  bsr.values = {0, 1, 2, 0, 0, 0, 3, 0};  // [[0 1 | 0], [2 0 | 3]]
  const CsrMatrix<int32_t, float> csr = sparse_formats::bsr_to_csr(bsr);
  EXPECT_EQ(csr.pattern.row_ptr, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(csr.pattern.col_idx, (std::vector<int32_t>{1, 0, 2}));
  EXPECT_EQ(csr.values, (std::vector<float>{1, 2, 3}));
}

TEST(FormatsBsr, ConvertsA131072SquareMaskWithoutDensifying) {
  // A band (diagonal and superdiagonal) of a 131072^2 mask: 17 GB dense, 2 MB as BSR.
  const int64_t n = 131072;
  CsrPattern<int32_t> band = CsrPattern<int32_t>::empty(n, n);
  band.col_idx.reserve(static_cast<size_t>(2 * n));
  for (int64_t r = 0; r < n; ++r) {
    band.col_idx.push_back(static_cast<int32_t>(r));
    if (r + 1 < n) band.col_idx.push_back(static_cast<int32_t>(r + 1));
    band.row_ptr[static_cast<size_t>(r + 1)] = static_cast<int32_t>(band.col_idx.size());
  }
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(band.view(), 64, 64);
  // 2048 diagonal blocks (127 of 4096 set) and 2047 superdiagonal blocks (1 set), all partial.
  EXPECT_EQ(mask.blocks.num_blocks(), 2048 + 2047);
  EXPECT_EQ(std::count(mask.kind.begin(), mask.kind.end(), P), 2048 + 2047);
  EXPECT_EQ(mask.blocks.block_col_idx[0], 0);
  EXPECT_EQ(mask.blocks.block_col_idx[1], 1);
  EXPECT_EQ(mask.blocks.block_col_idx.back(), 2047);
  expect_same(sparse_formats::bsr_mask_to_csr(mask), band);
}

TEST(FormatsBsr, ConvertsAPatternFarWiderThanItsEntries) {
  // 3 x 2^40 with 6 entries: a scratch of num_block_cols would be 2 TB, so the block-column set
  // must fall back to sorting. Blocks of 2 x 4.
  const int64_t cols = int64_t{1} << 40;
  const CsrPattern<int64_t> wide(3, cols, {0, 3, 5, 6}, {0, 1, cols - 1, 1, cols - 2, cols / 2});
  sparse_formats::validate(wide, "wide");
  const BsrMask<int64_t> mask = sparse_formats::csr_to_bsr_mask(wide.view(), 2, 4);
  EXPECT_EQ(mask.blocks.block_row_ptr, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(mask.blocks.block_col_idx, (std::vector<int64_t>{0, cols / 4 - 1, cols / 8}));
  EXPECT_EQ(mask.kind, (std::vector<BlockKind>{P, P, P}));
  // Block 0: (0,0), (0,1), (1,1) -> bits 0, 1, 5. Block 1: (0,3), (1,2) -> bits 3, 6. Block 2: bit
  // 0.
  EXPECT_EQ(mask.partial_bits, (std::vector<uint64_t>{0b100011, 0b1001000, 0b1}));
  sparse_formats::validate(mask, "mask");
  expect_same(sparse_formats::bsr_mask_to_csr(mask), wide);
  expect_same(sparse_formats::csr_to_bsr_pattern(wide.view(), 2, 4), mask.blocks);
}

}  // namespace
