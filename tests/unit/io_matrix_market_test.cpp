// Matrix Market reading: hand-written files parsed exactly, and one test per malformed input
// checking that the message names the source, the line and the problem. Writing and round trips:
// io_matrix_market_write_test.cpp.
#include "support/matrix_market_checks.hpp"

#include <fstream>
#include <limits>
#include <vector>

namespace {

using namespace spattn::testing::matrix_market_checks;

// ---- parsing hand-written files
// ------------------------------------------------------------------

TEST(MatrixMarketRead, CoordinateRealWithCommentsBlankLinesAndUnsortedEntries) {
  const auto data = parse(
      "%%MatrixMarket matrix coordinate real general\n"
      "% a comment\n"
      "\n"
      "3 4 4\n"
      "3 1 -2.5\n"
      "% comment between entries\n"
      "1 4 1e-3\n"
      "\n"
      "1 2 +7\n"
      "3 3 0.25\n");
  EXPECT_EQ(data.num_rows, 3);
  EXPECT_EQ(data.num_cols, 4);
  EXPECT_FALSE(data.is_pattern);
  EXPECT_FALSE(data.is_dense);
  EXPECT_FALSE(data.is_symmetric);
  EXPECT_EQ(data.csr.pattern.row_ptr, (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(data.csr.pattern.col_idx, (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(data.csr.values, (std::vector<double>{7.0, 1e-3, -2.5, 0.25}));
  EXPECT_TRUE(data.dense.empty());
}

TEST(MatrixMarketRead, IntegerFieldCaseInsensitiveBannerAndCrlf) {
  const auto data = parse(
      "%%MatrixMarket MATRIX Coordinate INTEGER General\r\n"
      "2 2 2\r\n"
      "2 2 -9\r\n"
      "1 1 12\r\n");
  EXPECT_EQ(data.csr.pattern.row_ptr, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(data.csr.pattern.col_idx, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(data.csr.values, (std::vector<double>{12.0, -9.0}));
}

TEST(MatrixMarketRead, PatternGetsValueOneAndKeepsExplicitZerosOfRealFiles) {
  const auto pattern = parse("%%MatrixMarket matrix coordinate pattern general\n2 3 2\n2 3\n1 1\n");
  EXPECT_TRUE(pattern.is_pattern);
  EXPECT_EQ(pattern.csr.pattern.col_idx, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(pattern.csr.values, (std::vector<double>{1.0, 1.0}));

  const auto zeros = parse("%%MatrixMarket matrix coordinate real general\n2 2 1\n2 1 0.0\n");
  EXPECT_EQ(zeros.csr.nnz(), 1);
  EXPECT_EQ(zeros.csr.values, (std::vector<double>{0.0}));
}

TEST(MatrixMarketRead, SymmetricStoresBothTrianglesAndTheDiagonalOnce) {
  // Lower triangle of [[1, 2, 0], [2, 0, 4], [0, 4, 5]].
  const auto data =
      parse("%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 1\n2 1 2\n3 2 4\n3 3 5\n");
  EXPECT_TRUE(data.is_symmetric);
  EXPECT_EQ(data.csr.pattern.row_ptr, (std::vector<int64_t>{0, 2, 4, 6}));
  EXPECT_EQ(data.csr.pattern.col_idx, (std::vector<int64_t>{0, 1, 0, 2, 1, 2}));
  EXPECT_EQ(data.csr.values, (std::vector<double>{1, 2, 2, 4, 4, 5}));
}

TEST(MatrixMarketRead, SymmetricPattern) {
  const auto data = parse("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 2\n2 1\n2 2\n");
  EXPECT_EQ(data.csr.pattern.row_ptr, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(data.csr.pattern.col_idx, (std::vector<int64_t>{1, 0, 1}));
}

TEST(MatrixMarketRead, DuplicatesFollowThePolicy) {
  const std::string text =
      "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 1.5\n2 1 4\n1 2 2.25\n";
  const auto summed = parse(text);
  EXPECT_EQ(summed.csr.pattern.col_idx, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(summed.csr.values, (std::vector<double>{3.75, 4.0}));
  const auto last = parse(text, sf::DuplicatePolicy::last);
  EXPECT_EQ(last.csr.values, (std::vector<double>{2.25, 4.0}));
  expect_parse_error(text, {"test.mtx:5:", "duplicate entry (1, 2)", "line 3"},
                     sf::DuplicatePolicy::reject);
  const auto pattern = parse("%%MatrixMarket matrix coordinate pattern general\n1 2 2\n1 1\n1 1\n");
  EXPECT_EQ(pattern.csr.nnz(), 1);
  EXPECT_EQ(pattern.csr.values, (std::vector<double>{1.0}));
}

TEST(MatrixMarketRead, ArrayIsColumnMajorInTheFileRowMajorInTheResult) {
  // [[1, 2, 3], [4, 5, 6]] listed column by column.
  const auto data = parse("%%MatrixMarket matrix array real general\n% c\n2 3\n1\n4\n2\n5\n3\n6\n");
  EXPECT_TRUE(data.is_dense);
  EXPECT_EQ(data.num_rows, 2);
  EXPECT_EQ(data.num_cols, 3);
  EXPECT_EQ(data.dense, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(data.csr.nnz(), 0);
  const auto integers = parse("%%MatrixMarket matrix array integer general\n1 2\n-3\n7\n");
  EXPECT_EQ(integers.dense, (std::vector<double>{-3, 7}));
}

TEST(MatrixMarketRead, SizesZero) {
  const auto empty = parse("%%MatrixMarket matrix coordinate real general\n0 0 0\n");
  EXPECT_EQ(empty.num_rows, 0);
  EXPECT_EQ(empty.csr.pattern.row_ptr, (std::vector<int64_t>{0}));
  const auto no_entries = parse("%%MatrixMarket matrix coordinate pattern general\n5 3 0\n");
  EXPECT_EQ(no_entries.csr.pattern.row_ptr, (std::vector<int64_t>(6, 0)));
  const auto no_cols = parse("%%MatrixMarket matrix coordinate real general\n4 0 0\n");
  EXPECT_EQ(no_cols.csr.pattern.row_ptr.size(), 5u);
  const auto dense = parse("%%MatrixMarket matrix array real general\n0 0\n");
  EXPECT_TRUE(dense.is_dense);
  EXPECT_TRUE(dense.dense.empty());
  const auto dense_rows = parse("%%MatrixMarket matrix array real general\n3 0\n");
  EXPECT_EQ(dense_rows.num_rows, 3);
  EXPECT_TRUE(dense_rows.dense.empty());
}

// ---- malformed input: one test per failure
// -------------------------------------------------------

TEST(MatrixMarketMalformed, EmptyInput) { expect_parse_error("", {"test.mtx:0:", "empty input"}); }

TEST(MatrixMarketMalformed, MissingBanner) {
  expect_parse_error("3 3 1\n1 1 1\n", {"test.mtx:1:", "missing banner", "'3 3 1'"});
}

TEST(MatrixMarketMalformed, BannerWithTooFewWords) {
  expect_parse_error("%%MatrixMarket matrix coordinate real\n1 1 0\n",
                     {"test.mtx:1:", "bad banner", "found 4 words"});
}

TEST(MatrixMarketMalformed, UnsupportedObject) {
  expect_parse_error("%%MatrixMarket vector coordinate real general\n1 0\n",
                     {"test.mtx:1:", "unsupported object 'vector'"});
}

TEST(MatrixMarketMalformed, UnsupportedFormat) {
  expect_parse_error("%%MatrixMarket matrix sparse real general\n1 1 0\n",
                     {"test.mtx:1:", "unsupported format 'sparse'"});
}

TEST(MatrixMarketMalformed, ComplexFieldIsUnsupported) {
  expect_parse_error("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 0\n",
                     {"test.mtx:1:", "unsupported field 'complex'"});
}

TEST(MatrixMarketMalformed, HermitianIsUnsupported) {
  expect_parse_error("%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n",
                     {"test.mtx:1:", "unsupported symmetry 'hermitian'"});
}

TEST(MatrixMarketMalformed, SkewSymmetricIsUnsupported) {
  expect_parse_error("%%MatrixMarket matrix coordinate real skew-symmetric\n1 1 0\n",
                     {"test.mtx:1:", "unsupported symmetry 'skew-symmetric'"});
}

TEST(MatrixMarketMalformed, ArrayPatternIsUnsupported) {
  expect_parse_error("%%MatrixMarket matrix array pattern general\n1 1\n",
                     {"test.mtx:1:", "unsupported field 'pattern' for array files"});
}

TEST(MatrixMarketMalformed, SymmetricArrayIsUnsupported) {
  expect_parse_error("%%MatrixMarket matrix array real symmetric\n1 1\n1\n",
                     {"test.mtx:1:", "unsupported symmetry 'symmetric' for array files"});
}

TEST(MatrixMarketMalformed, MissingSizeLine) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n% only a comment\n",
                     {"test.mtx:2:", "missing size line"});
}

TEST(MatrixMarketMalformed, SizeLineWithTwoValuesInCoordinateFile) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n3 3\n",
                     {"test.mtx:2:", "bad size line", "found 2 values"});
}

TEST(MatrixMarketMalformed, SizeLineWithThreeValuesInArrayFile) {
  expect_parse_error("%%MatrixMarket matrix array real general\n2 2 4\n",
                     {"test.mtx:2:", "bad size line", "found 3 values"});
}

TEST(MatrixMarketMalformed, NegativeSize) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n-3 3 0\n",
                     {"test.mtx:2:", "negative size", "rows -3"});
}

TEST(MatrixMarketMalformed, NonNumericSize) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n3 x3 1\n",
                     {"test.mtx:2:", "column count 'x3' is not an integer"});
}

TEST(MatrixMarketMalformed, CountOverflowingInt64) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n3 3 99999999999999999999\n",
                     {"test.mtx:2:", "entry count '99999999999999999999' does not fit"});
}

TEST(MatrixMarketMalformed, MoreEntriesThanRowsTimesCols) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 3 7\n",
                     {"test.mtx:2:", "entry count 7 exceeds rows * cols = 2 * 3"});
}

TEST(MatrixMarketMalformed, HugeShapeWithCountAboveRowsTimesCols) {
  // rows * cols would overflow int64; the count check must not.
  expect_parse_error(
      "%%MatrixMarket matrix coordinate real general\n4000000000 4000000000 9223372036854775807\n1 "
      "1 1\n",
      {"test.mtx:3:", "expected 9223372036854775807 entries, found 1"});
}

TEST(MatrixMarketMalformed, SymmetricNotSquare) {
  expect_parse_error("%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
                     {"test.mtx:2:", "must be square", "2 x 3"});
}

TEST(MatrixMarketMalformed, SymmetricCountAboveLowerTriangle) {
  // A 3 x 3 lower triangle with diagonal has 6 entries.
  expect_parse_error("%%MatrixMarket matrix coordinate real symmetric\n3 3 7\n",
                     {"test.mtx:2:", "entry count 7 exceeds the 3 x 3 lower triangle"});
}

TEST(MatrixMarketMalformed, ArrayShapeOverflowingInt64) {
  expect_parse_error("%%MatrixMarket matrix array real general\n4000000000 4000000000\n",
                     {"test.mtx:2:", "overflows int64"});
}

TEST(MatrixMarketMalformed, ZeroBasedIndex) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n0 2 1\n",
                     {"test.mtx:4:", "entry 2: row index 0 is out of range [1, 3]", "1-based"});
}

TEST(MatrixMarketMalformed, ColumnOutOfRange) {
  expect_parse_error("%%MatrixMarket matrix coordinate pattern general\n3 3 1\n2 4\n",
                     {"test.mtx:3:", "column index 4 is out of range [1, 3]"});
}

TEST(MatrixMarketMalformed, SymmetricEntryAboveDiagonal) {
  expect_parse_error("%%MatrixMarket matrix coordinate real symmetric\n3 3 1\n1 3 2\n",
                     {"test.mtx:3:", "(1, 3) lies above the diagonal"});
}

TEST(MatrixMarketMalformed, NonNumericValue) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 abc\n",
                     {"test.mtx:3:", "entry 1: value 'abc' is not a number"});
}

TEST(MatrixMarketMalformed, NonNumericIndex) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1.0 1 1\n",
                     {"test.mtx:3:", "row index '1.0' is not an integer"});
}

TEST(MatrixMarketMalformed, FractionInIntegerField) {
  expect_parse_error("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n",
                     {"test.mtx:3:", "integer value '1.5' is not an integer"});
}

TEST(MatrixMarketMalformed, WrongTokenCountInEntry) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n",
                     {"test.mtx:3:", "entry 1: expected 3 values (row col value), found 2"});
}

TEST(MatrixMarketMalformed, TwoValuesPerLineInArray) {
  expect_parse_error("%%MatrixMarket matrix array real general\n2 1\n1 2\n",
                     {"test.mtx:3:", "expected 1 value per line", "found 2"});
}

TEST(MatrixMarketMalformed, TruncatedCoordinateFile) {
  std::string text = "%%MatrixMarket matrix coordinate real general\n10 10 10\n";
  for (int k = 1; k <= 7; ++k) text += std::to_string(k) + " " + std::to_string(k) + " 1\n";
  expect_parse_error(text, {"test.mtx:9:", "expected 10 entries, found 7"});
}

TEST(MatrixMarketMalformed, TruncatedArrayFile) {
  expect_parse_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
                     {"test.mtx:5:", "expected 4 entries, found 3"});
}

TEST(MatrixMarketMalformed, TooManyEntries) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 2\n",
                     {"test.mtx:4:", "too many entries", "declares 1"});
}

TEST(MatrixMarketMalformed, NanValue) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 nan\n",
                     {"test.mtx:3:", "value 'nan' is not finite"});
}

TEST(MatrixMarketMalformed, InfValueInArray) {
  expect_parse_error("%%MatrixMarket matrix array real general\n1 2\n1\n-inf\n",
                     {"test.mtx:4:", "entry 2: value '-inf' is not finite"});
}

TEST(MatrixMarketMalformed, ValueOutOfDoubleRange) {
  expect_parse_error("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1e400\n",
                     {"test.mtx:3:", "value '1e400' is out of the range of double"});
}

TEST(MatrixMarketMalformed, LyingHeaderFailsFastWithoutAllocating) {
  // 10^15 declared entries would need 32 PB if reserved up front.
  const auto start = std::chrono::steady_clock::now();
  expect_parse_error(
      "%%MatrixMarket matrix coordinate real general\n100000000 100000000 1000000000000000\n1 1 "
      "1\n",
      {"test.mtx:3:", "expected 1000000000000000 entries, found 1"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
