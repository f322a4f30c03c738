// validate() on CSR data: one test per rejected defect, each checking that the message names the
// argument, the field, the position and the values. BSR validation is in formats_validate_bsr_test.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sparse_formats/csr.hpp>
#include <sparse_formats/validate.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using formats_testing::throws_with;
using sparse_formats::CsrMatrix;
using sparse_formats::CsrPattern;
using sparse_formats::CsrPatternView;
using sparse_formats::validate;

// The 5 x 5 mask
//   row 0: 1 1 . . 1
//   row 1: 1 1 . 1 .
//   row 2: . . . . .
//   row 3: . . 1 1 .
//   row 4: 1 . . . 1
CsrPattern<int32_t> hand_pattern() {
  return CsrPattern<int32_t>(5, 5, {0, 3, 6, 6, 8, 10}, {0, 1, 4, 0, 1, 3, 2, 3, 0, 4});
}

CsrMatrix<int32_t, double> hand_matrix() {
  CsrMatrix<int32_t, double> m;
  m.pattern = hand_pattern();
  m.values = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  return m;
}

TEST(FormatsValidateCsr, AcceptsValidPatternsOfEveryShape) {
  EXPECT_NO_THROW(validate(hand_pattern(), "mask"));
  EXPECT_NO_THROW(validate(hand_matrix(), "q"));
  EXPECT_NO_THROW(validate(CsrPattern<int32_t>(), "mask"));  // 0 x 0
  EXPECT_NO_THROW(validate(CsrPattern<int64_t>::empty(1, 0), "mask"));
  EXPECT_NO_THROW(validate(CsrPattern<int64_t>::empty(0, 1), "mask"));
  EXPECT_NO_THROW(validate(CsrPattern<int32_t>::empty(7, 7), "mask"));
  const CsrPattern<int32_t> p = hand_pattern();
  EXPECT_NO_THROW(validate(p.view(), 6, 10, "mask"));
}

TEST(FormatsValidateCsr, RejectsNegativeNumRows) {
  CsrPattern<int32_t> p = hand_pattern();
  p.num_rows = -1;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); }, {"mask: num_rows = -1 is negative"}));
}

TEST(FormatsValidateCsr, RejectsNegativeNumCols) {
  CsrPattern<int32_t> p = hand_pattern();
  p.num_cols = -3;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); }, {"mask: num_cols = -3 is negative"}));
}

TEST(FormatsValidateCsr, RejectsRowPtrOfWrongLength) {
  CsrPattern<int32_t> p = hand_pattern();
  p.row_ptr.pop_back();
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: row_ptr has 5 entries, expected num_rows + 1 = 6"}));
}

TEST(FormatsValidateCsr, RejectsViewRowPtrSizeThatDisagreesWithNumRows) {
  const CsrPattern<int32_t> p = hand_pattern();
  EXPECT_TRUE(throws_with([&] { validate(p.view(), 7, 10, "k"); },
                          {"k: row_ptr has 7 entries, expected num_rows + 1 = 6"}));
}

TEST(FormatsValidateCsr, RejectsNullRowPtr) {
  CsrPatternView<int32_t> view;
  view.num_rows = 0;
  view.num_cols = 4;
  EXPECT_TRUE(throws_with([&] { validate(view, 1, 0, "mask"); },
                          {"mask: row_ptr is null but must hold 1 entries"}));
}

TEST(FormatsValidateCsr, RejectsNullColIdxWithEntries) {
  const std::vector<int32_t> row_ptr = {0, 2};
  const CsrPatternView<int32_t> view{1, 4, row_ptr.data(), nullptr};
  EXPECT_TRUE(throws_with([&] { validate(view, 2, 2, "mask"); },
                          {"mask: col_idx is null but must hold 2 entries"}));
}

TEST(FormatsValidateCsr, RejectsRowPtrNotStartingAtZero) {
  CsrPattern<int32_t> p = hand_pattern();
  p.row_ptr[0] = 1;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); }, {"mask: row_ptr[0] = 1 (must be 0)"}));
}

TEST(FormatsValidateCsr, RejectsDecreasingRowPtr) {
  CsrPattern<int32_t> p = hand_pattern();
  p.row_ptr[3] = 5;  // {0, 3, 6, 5, 8, 10}
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: row_ptr[3] = 5 < row_ptr[2] = 6 (row_ptr must not decrease)"}));
}

TEST(FormatsValidateCsr, RejectsRowPtrEndOtherThanNnz) {
  CsrPattern<int32_t> p = hand_pattern();
  p.row_ptr[5] = 9;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: row_ptr[5] = 9 but col_idx has 10 entries"}));
}

TEST(FormatsValidateCsr, RejectsNegativeColumn) {
  CsrPattern<int32_t> p = hand_pattern();
  p.col_idx[3] = -1;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: col_idx[3] = -1 is out of range [0, 5) (row 1)"}));
}

TEST(FormatsValidateCsr, RejectsColumnPastNumCols) {
  CsrPattern<int32_t> p = hand_pattern();
  p.col_idx[9] = 5;
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: col_idx[9] = 5 is out of range [0, 5) (row 4)"}));
}

TEST(FormatsValidateCsr, RejectsUnsortedColumns) {
  CsrPattern<int32_t> p = hand_pattern();
  p.col_idx[6] = 3;  // row 3: {3, 3} -> make it {3, 2}
  p.col_idx[7] = 2;
  EXPECT_TRUE(throws_with(
      [&] { validate(p, "mask"); },
      {"mask: col_idx[7] = 2 < col_idx[6] = 3 (columns must strictly increase within row 3)"}));
}

TEST(FormatsValidateCsr, RejectsDuplicateColumns) {
  CsrPattern<int32_t> p = hand_pattern();
  p.col_idx[4] = 0;  // row 1: {0, 0, 3}
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: col_idx[4] = 0 repeats col_idx[3] (duplicate column in row 1)"}));
}

TEST(FormatsValidateCsr, AcceptsDecreasingColumnsAcrossARowBoundary) {
  // Row 0 ends with column 4 and row 1 starts with column 0: not a violation.
  const CsrPattern<int32_t> p = hand_pattern();
  ASSERT_GT(p.col_idx[2], p.col_idx[3]);
  EXPECT_NO_THROW(validate(p, "mask"));
}

TEST(FormatsValidateCsr, RejectsNumColsOverflowingInt32) {
  CsrPattern<int32_t> p = CsrPattern<int32_t>::empty(2, 0);
  p.num_cols = int64_t{3000000000};
  EXPECT_TRUE(throws_with(
      [&] { validate(p, "mask"); },
      {"mask: num_cols = 3000000000 does not fit the int32 index type (max 2147483647)"}));
  // The same shape is fine with 64-bit indices.
  CsrPattern<int64_t> wide = CsrPattern<int64_t>::empty(2, 0);
  wide.num_cols = int64_t{3000000000};
  EXPECT_NO_THROW(validate(wide, "mask"));
}

TEST(FormatsValidateCsr, RejectsNumRowsOverflowingInt32) {
  const std::vector<int32_t> row_ptr = {0};
  const CsrPatternView<int32_t> view{int64_t{1} << 31, 1, row_ptr.data(), nullptr};
  EXPECT_TRUE(throws_with([&] { validate(view, 1, 0, "mask"); },
                          {"mask: num_rows = 2147483648 does not fit the int32 index type"}));
}

TEST(FormatsValidateCsr, RejectsNnzOverflowingInt32) {
  // The length check runs before anything is read, so a claimed length is enough to test it.
  const std::vector<int32_t> row_ptr = {0};
  const std::vector<int32_t> col_idx = {0};
  const CsrPatternView<int32_t> view{0, 4, row_ptr.data(), col_idx.data()};
  EXPECT_TRUE(
      throws_with([&] { validate(view, 1, int64_t{3000000000}, "mask"); },
                  {"mask: col_idx has 3000000000 entries, more than the int32 index type"}));
}

TEST(FormatsValidateCsr, RejectsValuesOfWrongSize) {
  CsrMatrix<int32_t, double> m = hand_matrix();
  m.values.pop_back();
  EXPECT_TRUE(
      throws_with([&] { validate(m, "q"); }, {"q: values has 9 entries, expected nnz = 10"}));
}

TEST(FormatsValidateCsr, RejectsNaNValueNamingRowAndColumn) {
  CsrMatrix<int32_t, double> m = hand_matrix();
  m.values[6] = std::numeric_limits<double>::quiet_NaN();  // entry (3, 2)
  EXPECT_TRUE(
      throws_with([&] { validate(m, "q"); }, {"q: values[6] = nan is not finite (row 3, col 2)"}));
}

TEST(FormatsValidateCsr, RejectsInfinitiesInFloatAndInt64Matrices) {
  CsrMatrix<int64_t, float> m;
  m.pattern = CsrPattern<int64_t>(2, 3, {0, 1, 2}, {2, 0});
  m.values = {1.0f, -std::numeric_limits<float>::infinity()};
  EXPECT_TRUE(
      throws_with([&] { validate(m, "v"); }, {"v: values[1] = -inf is not finite (row 1, col 0)"}));
  m.values = {std::numeric_limits<float>::infinity(), 1.0f};
  EXPECT_TRUE(
      throws_with([&] { validate(m, "v"); }, {"v: values[0] = inf is not finite (row 0, col 2)"}));
}

TEST(FormatsValidateCsr, ReportsTheRowOfAnEntryAfterEmptyRows) {
  // Rows 0..2 are empty; the bad column sits in row 3.
  CsrPattern<int64_t> p(5, 4, {0, 0, 0, 0, 2, 2}, {1, 4});
  EXPECT_TRUE(throws_with([&] { validate(p, "mask"); },
                          {"mask: col_idx[1] = 4 is out of range [0, 4) (row 3)"}));
}

}  // namespace
