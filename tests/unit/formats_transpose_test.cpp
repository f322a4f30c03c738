// Transposes of CSR patterns / matrices and of BSR patterns, masks and matrices.
#include <gtest/gtest.h>

#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <sparse_formats/validate.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using formats_testing::expect_same;
using sparse_formats::BlockKind;
using sparse_formats::BsrMask;
using sparse_formats::BsrMatrix;
using sparse_formats::BsrPattern;
using sparse_formats::CsrMatrix;
using sparse_formats::CsrPattern;

// The 5 x 5 matrix with values 1..10 in row order:
//   row 0:  1  2  .  .  3
//   row 1:  4  5  .  6  .
//   row 2:  .  .  .  .  .
//   row 3:  .  .  7  8  .
//   row 4:  9  .  .  . 10
CsrMatrix<int32_t, double> hand_matrix() {
  CsrMatrix<int32_t, double> m;
  m.pattern = CsrPattern<int32_t>(5, 5, {0, 3, 6, 6, 8, 10}, {0, 1, 4, 0, 1, 3, 2, 3, 0, 4});
  m.values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  return m;
}

TEST(FormatsTranspose, CsrByHand) {
  const CsrMatrix<int32_t, double> t = sparse_formats::transpose(hand_matrix().view());
  // Column c of the input is row c of the output, rows in increasing order.
  EXPECT_EQ(t.pattern.row_ptr, (std::vector<int32_t>{0, 3, 5, 6, 8, 10}));
  EXPECT_EQ(t.pattern.col_idx, (std::vector<int32_t>{0, 1, 4, 0, 1, 3, 1, 3, 0, 4}));
  EXPECT_EQ(t.values, (std::vector<double>{1, 4, 9, 2, 5, 7, 6, 8, 3, 10}));
  expect_same(sparse_formats::transpose(hand_matrix().pattern.view()), t.pattern);
}

TEST(FormatsTranspose, NonSquareShapesSwap) {
  // 2 x 4: [[0 1 0 1], [1 0 0 0]] -> 4 x 2: [[0 1], [1 0], [0 0], [1 0]].
  const CsrPattern<int64_t> p(2, 4, {0, 2, 3}, {1, 3, 0});
  const CsrPattern<int64_t> t = sparse_formats::transpose(p.view());
  EXPECT_EQ(t.num_rows, 4);
  EXPECT_EQ(t.num_cols, 2);
  EXPECT_EQ(t.row_ptr, (std::vector<int64_t>{0, 1, 2, 2, 3}));
  EXPECT_EQ(t.col_idx, (std::vector<int64_t>{1, 0, 0}));
}

TEST(FormatsTranspose, TwiceIsIdentityForEveryShape) {
  const int64_t shapes[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {7, 7}, {97, 33}, {257, 257}};
  uint64_t seed = 40;
  for (const auto& shape : shapes) {
    SCOPED_TRACE(testing::Message() << shape[0] << " x " << shape[1]);
    const std::vector<uint8_t> dense = formats_testing::make_mask(
        shape[0], shape[1], formats_testing::Shape::random, 0.25, seed++);
    const std::vector<float> values = formats_testing::make_values<float>(dense, seed++);
    const CsrMatrix<int64_t, float> m =
        sparse_formats::dense_to_csr<int64_t>(values.data(), shape[0], shape[1]);
    const CsrMatrix<int64_t, float> t = sparse_formats::transpose(m.view());
    sparse_formats::validate(t, "t");
    // Element (r, c) of the input is (c, r) of the transpose.
    const std::vector<float> dense_t = sparse_formats::csr_to_dense(t.view());
    for (int64_t r = 0; r < shape[0]; ++r) {
      for (int64_t c = 0; c < shape[1]; ++c) {
        ASSERT_EQ(dense_t[static_cast<size_t>(c * shape[0] + r)],
                  values[static_cast<size_t>(r * shape[1] + c)]);
      }
    }
    const CsrMatrix<int64_t, float> tt = sparse_formats::transpose(t.view());
    expect_same(tt.pattern, m.pattern);
    EXPECT_EQ(tt.values, m.values);
  }
}

TEST(FormatsTranspose, BsrMaskByHand) {
  // Transposing the 2 x 2-block mask of the hand example moves block (I, J) to (J, I) and
  // transposes its bits: (0,1) bit (1,1) stays 3; (0,2) bit (0,0) -> block (2,0) bit 0.
  const BsrMask<int32_t> mask = sparse_formats::csr_to_bsr_mask(hand_matrix().pattern.view(), 2, 2);
  const BsrMask<int32_t> t = sparse_formats::transpose(mask);
  EXPECT_EQ(t.blocks.block_row_ptr, (std::vector<int32_t>{0, 2, 4, 6}));
  EXPECT_EQ(t.blocks.block_col_idx, (std::vector<int32_t>{0, 2, 0, 1, 0, 2}));
  // Blocks in output order: (0,0) full; (0,2) from (2,0) bit (0,0); (1,0) from (0,1) bit (1,1);
  // (1,1) from (1,1): bits (1,0), (1,1) -> (0,1), (1,1) = 2, 8; (2,0) from (0,2); (2,2) full.
  EXPECT_EQ(t.kind,
            (std::vector<BlockKind>{BlockKind::full, BlockKind::partial, BlockKind::partial,
                                    BlockKind::partial, BlockKind::partial, BlockKind::full}));
  EXPECT_EQ(t.partial_slot, (std::vector<int64_t>{-1, 0, 1, 2, 3, -1}));
  EXPECT_EQ(t.partial_bits, (std::vector<uint64_t>{0b0001, 0b1000, 0b1010, 0b0001}));
  sparse_formats::validate(t, "t");
}

// transpose(to_bsr(A, bm, bn)) == to_bsr(transpose(A), bn, bm) for masks, patterns and matrices.
TEST(FormatsTranspose, BsrTransposeCommutesWithBlocking) {
  const int64_t shapes[][2] = {{0, 0}, {1, 1}, {7, 7}, {97, 33}, {33, 97}, {257, 257}};
  const int64_t block_sizes[][2] = {{1, 1}, {2, 3}, {8, 16}, {7, 5}, {64, 32}, {300, 1}};
  uint64_t seed = 70;
  int64_t partial_blocks = 0;
  for (const auto& shape : shapes) {
    for (const formats_testing::Shape kind :
         {formats_testing::Shape::random, formats_testing::Shape::causal,
          formats_testing::Shape::block_dense}) {
      const std::vector<uint8_t> dense =
          formats_testing::make_mask(shape[0], shape[1], kind, 0.15, seed++);
      const std::vector<double> values = formats_testing::make_values<double>(dense, seed++);
      const CsrMatrix<int32_t, double> m =
          sparse_formats::dense_to_csr<int32_t>(values.data(), shape[0], shape[1]);
      const CsrMatrix<int32_t, double> mt = sparse_formats::transpose(m.view());
      for (const auto& block : block_sizes) {
        SCOPED_TRACE(testing::Message()
                     << shape[0] << " x " << shape[1] << ", blocks " << block[0] << " x "
                     << block[1] << ", shape " << static_cast<int>(kind));
        const BsrMask<int32_t> mask =
            sparse_formats::csr_to_bsr_mask(m.pattern.view(), block[0], block[1]);
        const BsrMask<int32_t> mask_t = sparse_formats::transpose(mask);
        sparse_formats::validate(mask_t, "mask_t");
        expect_same(mask_t, sparse_formats::csr_to_bsr_mask(mt.pattern.view(), block[1], block[0]));
        expect_same(sparse_formats::transpose(mask_t), mask);
        partial_blocks += mask.num_partial();

        expect_same(sparse_formats::transpose(mask.blocks.view()), mask_t.blocks);

        const BsrMatrix<int32_t, double> bsr =
            sparse_formats::csr_to_bsr(m.view(), block[0], block[1]);
        const BsrMatrix<int32_t, double> bsr_t = sparse_formats::transpose(bsr);
        const BsrMatrix<int32_t, double> expected =
            sparse_formats::csr_to_bsr(mt.view(), block[1], block[0]);
        sparse_formats::validate(bsr_t, "bsr_t");
        expect_same(bsr_t.blocks, expected.blocks);
        EXPECT_EQ(bsr_t.values, expected.values);
      }
    }
  }
  EXPECT_GT(partial_blocks, 1000);
}

}  // namespace
