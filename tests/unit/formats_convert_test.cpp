// Dense <-> CSR, COO -> CSR with each duplicate policy, and index-width conversion.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <sparse_formats/convert.hpp>
#include <sparse_formats/validate.hpp>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

using formats_testing::expect_same;
using formats_testing::throws_with;
using sparse_formats::CsrMatrix;
using sparse_formats::CsrPattern;
using sparse_formats::CsrPatternView;
using sparse_formats::DuplicatePolicy;

// The 3 x 4 matrix
//   [0  2  0  1]
//   [0  0  0  0]
//   [5  0 -3  0]
const std::vector<double> kDense = {0, 2, 0, 1, 0, 0, 0, 0, 5, 0, -3, 0};

TEST(FormatsConvertDense, DenseToCsrByHand) {
  const CsrMatrix<int32_t, double> csr = sparse_formats::dense_to_csr<int32_t>(kDense.data(), 3, 4);
  EXPECT_EQ(csr.num_rows(), 3);
  EXPECT_EQ(csr.num_cols(), 4);
  EXPECT_EQ(csr.pattern.row_ptr, (std::vector<int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(csr.pattern.col_idx, (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_EQ(csr.values, (std::vector<double>{2, 1, 5, -3}));
  EXPECT_NO_THROW(sparse_formats::validate(csr, "csr"));
}

TEST(FormatsConvertDense, CsrToDenseByHand) {
  CsrMatrix<int64_t, float> csr;
  csr.pattern = CsrPattern<int64_t>(3, 4, {0, 2, 2, 4}, {1, 3, 0, 2});
  csr.values = {2, 1, 5, -3};
  const std::vector<float> dense = sparse_formats::csr_to_dense(csr.view());
  EXPECT_EQ(dense, (std::vector<float>{0, 2, 0, 1, 0, 0, 0, 0, 5, 0, -3, 0}));
  EXPECT_EQ(sparse_formats::csr_pattern_to_dense(csr.pattern.view()),
            (std::vector<uint8_t>{0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0}));
}

TEST(FormatsConvertDense, DensePatternFromBytesAndFloats) {
  const std::vector<uint8_t> bytes = {0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0};
  const CsrPattern<int32_t> from_bytes =
      sparse_formats::dense_to_csr_pattern<int32_t>(bytes.data(), 3, 4);
  const CsrPattern<int32_t> from_values =
      sparse_formats::dense_to_csr_pattern<int32_t>(kDense.data(), 3, 4);
  EXPECT_EQ(from_bytes.row_ptr, (std::vector<int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(from_bytes.col_idx, (std::vector<int32_t>{1, 3, 0, 2}));
  expect_same(from_bytes, from_values);
}

template <typename Index, typename Value>
void check_dense_round_trip(int64_t rows, int64_t cols, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << rows << " x " << cols);
  const std::vector<uint8_t> mask =
      formats_testing::make_mask(rows, cols, formats_testing::Shape::random, 0.3, seed);
  const std::vector<Value> dense = formats_testing::make_values<Value>(mask, seed + 1);
  const CsrMatrix<Index, Value> csr = sparse_formats::dense_to_csr<Index>(dense.data(), rows, cols);
  sparse_formats::validate(csr, "csr");
  EXPECT_EQ(sparse_formats::csr_to_dense(csr.view()), dense);
  EXPECT_EQ(sparse_formats::csr_pattern_to_dense(csr.pattern.view()), mask);
  int64_t set = 0;
  for (uint8_t m : mask) set += m;
  EXPECT_EQ(csr.nnz(), set);
}

TEST(FormatsConvertDense, RoundTripsEveryShape) {
  const int64_t sizes[][2] = {{0, 0}, {1, 0},   {0, 1},   {1, 1},
                              {7, 7}, {97, 33}, {33, 97}, {257, 257}};
  uint64_t seed = 11;
  for (const auto& size : sizes) {
    check_dense_round_trip<int32_t, float>(size[0], size[1], seed++);
    check_dense_round_trip<int64_t, double>(size[0], size[1], seed++);
  }
}

TEST(FormatsConvertDense, RejectsNegativeShapeAndNullData) {
  EXPECT_TRUE(throws_with([] { sparse_formats::dense_to_csr<int32_t>(kDense.data(), -1, 4); },
                          {"dense_to_csr: num_rows = -1 is negative"}));
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::dense_to_csr_pattern<int32_t>(static_cast<const float*>(nullptr), 2, 3);
      },
      {"dense_to_csr_pattern: dense is null but must hold 2 x 3 values"}));
  EXPECT_TRUE(throws_with(
      [] { sparse_formats::dense_to_csr<int32_t>(kDense.data(), 1, int64_t{3000000000}); },
      {"dense_to_csr: num_cols = 3000000000 does not fit the int32 index type"}));
}

// ---- COO ----------------------------------------------------------------------------------------

// The entries of kDense in scrambled order, plus a repeat of (0, 1) at position 4.
const std::vector<int64_t> kRows = {2, 0, 0, 2, 0};
const std::vector<int64_t> kCols = {0, 3, 1, 2, 1};
const std::vector<double> kValues = {5, 1, 2, -3, 10};

TEST(FormatsConvertCoo, SortsEntriesWithoutDuplicates) {
  const std::vector<int64_t> rows(kRows.begin(), kRows.end() - 1);
  const std::vector<int64_t> cols(kCols.begin(), kCols.end() - 1);
  const std::vector<double> values(kValues.begin(), kValues.end() - 1);
  for (const DuplicatePolicy policy :
       {DuplicatePolicy::reject, DuplicatePolicy::sum, DuplicatePolicy::last}) {
    const CsrMatrix<int32_t, double> csr =
        sparse_formats::coo_to_csr<int32_t>(3, 4, rows, cols, values, policy);
    EXPECT_EQ(csr.pattern.row_ptr, (std::vector<int32_t>{0, 2, 2, 4}));
    EXPECT_EQ(csr.pattern.col_idx, (std::vector<int32_t>{1, 3, 0, 2}));
    EXPECT_EQ(csr.values, (std::vector<double>{2, 1, 5, -3}));
  }
}

TEST(FormatsConvertCoo, SumPolicyAddsDuplicates) {
  const CsrMatrix<int64_t, double> csr =
      sparse_formats::coo_to_csr<int64_t>(3, 4, kRows, kCols, kValues, DuplicatePolicy::sum);
  EXPECT_EQ(csr.pattern.col_idx, (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(csr.values, (std::vector<double>{12, 1, 5, -3}));
}

TEST(FormatsConvertCoo, LastPolicyKeepsTheLaterEntry) {
  const CsrMatrix<int32_t, float> csr = sparse_formats::coo_to_csr<int32_t>(
      3, 4, kRows, kCols, std::vector<float>{5, 1, 2, -3, 10}, DuplicatePolicy::last);
  EXPECT_EQ(csr.values, (std::vector<float>{10, 1, 5, -3}));
  // Three copies: the last in input order wins, wherever it sits.
  const CsrMatrix<int32_t, float> three = sparse_formats::coo_to_csr<int32_t>(
      1, 2, {0, 0, 0}, {1, 1, 1}, std::vector<float>{7, 8, 9}, DuplicatePolicy::last);
  EXPECT_EQ(three.values, (std::vector<float>{9}));
}

TEST(FormatsConvertCoo, RejectPolicyNamesTheDuplicateAndBothPositions) {
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr<int32_t>(3, 4, kRows, kCols, kValues, DuplicatePolicy::reject);
      },
      {"coo_to_csr: duplicate entry (0, 1) at positions 2 and 4"}));
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr_pattern<int64_t>(3, 4, kRows, kCols, DuplicatePolicy::reject);
      },
      {"coo_to_csr_pattern: duplicate entry (0, 1) at positions 2 and 4"}));
}

TEST(FormatsConvertCoo, PatternMergesDuplicatesUnderSumAndLast) {
  for (const DuplicatePolicy policy : {DuplicatePolicy::sum, DuplicatePolicy::last}) {
    const CsrPattern<int32_t> p =
        sparse_formats::coo_to_csr_pattern<int32_t>(3, 4, kRows, kCols, policy);
    EXPECT_EQ(p.row_ptr, (std::vector<int32_t>{0, 2, 2, 4}));
    EXPECT_EQ(p.col_idx, (std::vector<int32_t>{1, 3, 0, 2}));
  }
}

TEST(FormatsConvertCoo, RejectsOutOfRangeEntriesByPosition) {
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr_pattern<int32_t>(3, 4, {0, 3}, {0, 0}, DuplicatePolicy::sum);
      },
      {"coo_to_csr_pattern: entry 1 (rows[1] = 3, cols[1] = 0) is out of range for a 3 x 4 "
       "matrix"}));
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr<int32_t>(3, 4, {0, 1, 2}, {0, -1, 0},
                                            std::vector<double>{1, 2, 3}, DuplicatePolicy::sum);
      },
      {"coo_to_csr: entry 1 (rows[1] = 1, cols[1] = -1) is out of range"}));
  EXPECT_TRUE(throws_with(
      [] { sparse_formats::coo_to_csr_pattern<int32_t>(3, 4, {2}, {4}, DuplicatePolicy::sum); },
      {"entry 0 (rows[0] = 2, cols[0] = 4)"}));
}

TEST(FormatsConvertCoo, RejectsArraysOfDifferentLengths) {
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr_pattern<int32_t>(3, 4, {0, 1}, {0}, DuplicatePolicy::sum);
      },
      {"coo_to_csr_pattern: rows has 2 entries but cols has 1"}));
  EXPECT_TRUE(throws_with(
      [] {
        sparse_formats::coo_to_csr<int32_t>(3, 4, {0, 1}, {0, 1}, std::vector<double>{1},
                                            DuplicatePolicy::sum);
      },
      {"coo_to_csr: values has 1 entries but rows has 2"}));
}

TEST(FormatsConvertCoo, AgreesWithDenseOnRandomTriplets) {
  // 600 random triplets with repeats on a 97 x 33 grid; `sum` must match a dense accumulation.
  std::mt19937_64 rng(5);
  std::vector<int64_t> rows, cols;
  std::vector<double> values;
  std::vector<double> dense(97 * 33, 0.0);
  for (int i = 0; i < 600; ++i) {
    rows.push_back(static_cast<int64_t>(rng() % 97));
    cols.push_back(static_cast<int64_t>(rng() % 33));
    values.push_back(static_cast<double>(rng() % 5) + 1.0);
    dense[static_cast<size_t>(rows.back() * 33 + cols.back())] += values.back();
  }
  const CsrMatrix<int32_t, double> csr =
      sparse_formats::coo_to_csr<int32_t>(97, 33, rows, cols, values, DuplicatePolicy::sum);
  sparse_formats::validate(csr, "csr");
  EXPECT_EQ(sparse_formats::csr_to_dense(csr.view()), dense);
  EXPECT_LT(csr.nnz(), 600);  // there were repeats
}

// ---- index width --------------------------------------------------------------------------------

TEST(FormatsConvertIndex, WidensAndNarrowsWithoutChange) {
  const CsrPattern<int32_t> narrow(3, 4, {0, 2, 2, 4}, {1, 3, 0, 2});
  const CsrPattern<int64_t> wide = sparse_formats::convert_index<int64_t>(narrow.view());
  EXPECT_EQ(wide.row_ptr, (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(wide.col_idx, (std::vector<int64_t>{1, 3, 0, 2}));
  expect_same(sparse_formats::convert_index<int32_t>(wide.view()), narrow);
  expect_same(sparse_formats::convert_index<int32_t>(narrow.view()), narrow);
  expect_same(sparse_formats::convert_index<int64_t>(wide.view()), wide);
}

TEST(FormatsConvertIndex, RejectsNumColsBeyondInt32) {
  // A 2 x 3e9 pattern costs a few bytes: the columns are large, the entries few.
  const CsrPattern<int64_t> wide(2, 3000000000, {0, 1, 2}, {5, 2999999999});
  sparse_formats::validate(wide, "wide");
  EXPECT_TRUE(throws_with([&] { sparse_formats::convert_index<int32_t>(wide.view()); },
                          {"convert_index: num_cols = 3000000000 does not fit the int32 index "
                           "type (max 2147483647)"}));
  expect_same(sparse_formats::convert_index<int64_t>(wide.view()), wide);
}

TEST(FormatsConvertIndex, RejectsNumRowsBeyondInt32) {
  // The shape is checked before row_ptr is read, so a one-entry row_ptr stands in for 2^31 + 1.
  const std::vector<int64_t> row_ptr = {0};
  const CsrPatternView<int64_t> tall{int64_t{1} << 31, 0, row_ptr.data(), nullptr};
  EXPECT_TRUE(throws_with([&] { sparse_formats::convert_index<int32_t>(tall); },
                          {"convert_index: num_rows = 2147483648 does not fit the int32"}));
}

TEST(FormatsConvertIndex, RejectsNnzBeyondInt32) {
  // convert_index checks nnz (row_ptr's end) before reading any column.
  const std::vector<int64_t> row_ptr = {0, 3000000000};
  const std::vector<int64_t> col_idx = {0};
  const CsrPatternView<int64_t> view{1, 4, row_ptr.data(), col_idx.data()};
  EXPECT_TRUE(throws_with([&] { sparse_formats::convert_index<int32_t>(view); },
                          {"convert_index: nnz = 3000000000 does not fit the int32 index type"}));
}

}  // namespace
