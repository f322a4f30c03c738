// Matrix Market reading and writing: hand-written files parsed exactly, round trips, and one test
// per malformed input checking that the message names the source, the line and the problem.
#include <sparse_formats/error.hpp>
#include <sparse_formats/matrix_market.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace sf = sparse_formats;
namespace fs = std::filesystem;

namespace {

sf::MatrixMarketData parse(const std::string& text,
                           sf::DuplicatePolicy duplicates = sf::DuplicatePolicy::sum) {
  std::istringstream in(text);
  return sf::read_matrix_market(in, "test.mtx", duplicates);
}

// Parses `text` expecting a FormatError whose message contains every one of `parts`.
void expect_parse_error(const std::string& text, std::initializer_list<const char*> parts,
                        sf::DuplicatePolicy duplicates = sf::DuplicatePolicy::sum) {
  try {
    parse(text, duplicates);
    ADD_FAILURE() << "no FormatError for:\n" << text;
  } catch (const sf::FormatError& error) {
    const std::string message = error.what();
    for (const char* part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const sf::FormatError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no FormatError";
  return "";
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

// A random CSR pattern with about `density` of the entries present.
template <typename Index>
sf::CsrPattern<Index> random_pattern(int64_t rows, int64_t cols, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution present(density);
  sf::CsrPattern<Index> pattern = sf::CsrPattern<Index>::empty(rows, cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (present(rng)) pattern.col_idx.push_back(static_cast<Index>(c));
    }
    pattern.row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<Index>(pattern.col_idx.size());
  }
  return pattern;
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto tag = std::chrono::steady_clock::now().time_since_epoch().count();
    dir_ = fs::temp_directory_path() / ("spattn_io_mtx_" + std::to_string(tag));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  int64_t files_in_dir() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  }
  fs::path dir_;
};

}  // namespace

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

// ---- round trips
// ---------------------------------------------------------------------------------

TEST(MatrixMarketRoundTrip, PatternThroughStream) {
  const int64_t shapes[][2] = {{0, 0}, {1, 1}, {7, 97}, {97, 7}, {257, 1}, {1, 257}};
  unsigned seed = 1;
  for (const auto& shape : shapes) {
    const auto pattern = random_pattern<int32_t>(shape[0], shape[1], 0.3, seed++);
    std::stringstream stream;
    sf::write_matrix_market(stream, pattern.view());
    const auto data = sf::read_matrix_market(stream, "round_trip.mtx");
    EXPECT_TRUE(data.is_pattern);
    EXPECT_EQ(data.num_rows, shape[0]);
    EXPECT_EQ(data.num_cols, shape[1]);
    EXPECT_EQ(data.csr.pattern.row_ptr,
              std::vector<int64_t>(pattern.row_ptr.begin(), pattern.row_ptr.end()));
    EXPECT_EQ(data.csr.pattern.col_idx,
              std::vector<int64_t>(pattern.col_idx.begin(), pattern.col_idx.end()));
    if (shape[0] * shape[1] >= 49) {
      EXPECT_GT(data.csr.nnz(), 0);
    }
  }
}

TEST(MatrixMarketRoundTrip, RealValuesAreBitExact) {
  const std::vector<double> values = {0.1,
                                      1.0 / 3.0,
                                      -2.0 / 7.0,
                                      1e-300,
                                      4.9406564584124654e-324,
                                      -0.0,
                                      3.141592653589793,
                                      std::numeric_limits<double>::max(),
                                      -std::numeric_limits<double>::min(),
                                      123456789.0};
  sf::CsrMatrix<int64_t, double> csr;
  csr.pattern = sf::CsrPattern<int64_t>(3, 5, {0, 4, 5, 10}, {0, 1, 2, 4, 3, 0, 1, 2, 3, 4});
  csr.values = values;
  std::stringstream stream;
  sf::write_matrix_market(stream, csr.view());
  const auto data = sf::read_matrix_market(stream, "round_trip.mtx");
  EXPECT_FALSE(data.is_pattern);
  EXPECT_EQ(data.csr.pattern.row_ptr, csr.pattern.row_ptr);
  EXPECT_EQ(data.csr.pattern.col_idx, csr.pattern.col_idx);
  ASSERT_EQ(data.csr.values.size(), values.size());
  for (std::size_t k = 0; k < values.size(); ++k) {
    EXPECT_TRUE(same_bits(data.csr.values[k], csr.values[k])) << k << ": " << data.csr.values[k];
  }
}

TEST(MatrixMarketRoundTrip, FloatValuesReadBackExactly) {
  sf::CsrMatrix<int32_t, float> csr;
  csr.pattern = sf::CsrPattern<int32_t>(2, 2, {0, 2, 3}, {0, 1, 1});
  csr.values = {0.1f, 1.0f / 3.0f, std::numeric_limits<float>::denorm_min()};
  std::stringstream stream;
  sf::write_matrix_market(stream, csr.view());
  const auto data = sf::read_matrix_market(stream, "float.mtx");
  ASSERT_EQ(data.csr.values.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k)
    EXPECT_EQ(static_cast<float>(data.csr.values[k]), csr.values[k]);
}

TEST(MatrixMarketRoundTrip, DenseIsWrittenColumnMajor) {
  const std::vector<double> dense = {1, 2, 3, 4, 5, 6};  // (2, 3) row-major
  std::stringstream stream;
  sf::write_matrix_market_dense(stream, dense.data(), 2, 3);
  EXPECT_EQ(stream.str(), "%%MatrixMarket matrix array real general\n2 3\n1\n4\n2\n5\n3\n6\n");
  const auto data = sf::read_matrix_market(stream, "dense.mtx");
  EXPECT_EQ(data.dense, dense);

  std::vector<double> big(7 * 97);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = 1.0 / static_cast<double>(i + 1);
  std::stringstream big_stream;
  sf::write_matrix_market_dense(big_stream, big.data(), 7, 97);
  EXPECT_EQ(sf::read_matrix_market(big_stream, "big.mtx").dense, big);
}

TEST_F(TempDir, FileWritersAndConvenienceReaders) {
  const auto pattern = random_pattern<int64_t>(97, 7, 0.4, 42);
  sf::write_matrix_market_file(path("mask.mtx"), pattern.view());
  const auto mask = sf::read_mask_mtx<int32_t>(path("mask.mtx"));
  EXPECT_EQ(mask.num_rows, 97);
  EXPECT_EQ(std::vector<int64_t>(mask.col_idx.begin(), mask.col_idx.end()), pattern.col_idx);
  EXPECT_GT(mask.nnz(), 0);

  const std::vector<double> dense = {0, 2, 0, 0, 0, -1};  // (3, 2)
  sf::write_matrix_market_dense_file(path("dense.mtx"), dense.data(), 3, 2);
  const auto from_dense = sf::read_csr_mtx<int64_t>(path("dense.mtx"));
  EXPECT_EQ(from_dense.pattern.row_ptr, (std::vector<int64_t>{0, 1, 1, 2}));
  EXPECT_EQ(from_dense.pattern.col_idx, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(from_dense.values, (std::vector<double>{2, -1}));
  EXPECT_EQ(sf::read_mask_mtx(path("dense.mtx")).col_idx, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(files_in_dir(), 2);  // no temporary files left behind
}

TEST_F(TempDir, FailedWriteLeavesTheOldFileAndNoTemporary) {
  sf::CsrMatrix<int64_t, double> csr;
  csr.pattern = sf::CsrPattern<int64_t>(1, 2, {0, 2}, {0, 1});
  csr.values = {1.0, 2.0};
  sf::write_matrix_market_file(path("a.mtx"), csr.view());
  csr.values[1] = std::numeric_limits<double>::quiet_NaN();
  const std::string message =
      error_message([&] { sf::write_matrix_market_file(path("a.mtx"), csr.view()); });
  EXPECT_NE(message.find("values[1] = nan is not finite"), std::string::npos) << message;
  EXPECT_EQ(sf::read_csr_mtx(path("a.mtx")).values, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(files_in_dir(), 1);
}

TEST_F(TempDir, WriteIntoMissingDirectoryNamesThePath) {
  const auto pattern = sf::CsrPattern<int32_t>::empty(2, 2);
  const std::string target = path("no_such_dir/m.mtx");
  const std::string message =
      error_message([&] { sf::write_matrix_market_file(target, pattern.view()); });
  EXPECT_NE(message.find(target), std::string::npos) << message;
}

TEST_F(TempDir, ReaderNamesTheFileAndLine) {
  std::ofstream(path("bad.mtx")) << "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n";
  const std::string message = error_message([&] { sf::read_mask_mtx(path("bad.mtx")); });
  EXPECT_NE(message.find(path("bad.mtx") + ":3:"), std::string::npos) << message;
  const std::string missing = error_message([&] { sf::read_csr_mtx(path("missing.mtx")); });
  EXPECT_NE(missing.find("missing.mtx: cannot open"), std::string::npos) << missing;
}

TEST_F(TempDir, NarrowIndexThatDoesNotFitIsAnError) {
  std::ofstream(path("wide.mtx"))
      << "%%MatrixMarket matrix coordinate pattern general\n1 3000000000 1\n1 2999999999\n";
  EXPECT_EQ(sf::read_mask_mtx<int64_t>(path("wide.mtx")).col_idx,
            (std::vector<int64_t>{2999999998}));
  const std::string message = error_message([&] { sf::read_mask_mtx<int32_t>(path("wide.mtx")); });
  EXPECT_NE(message.find("does not fit a 32-bit index type"), std::string::npos) << message;
}

// ---- writer input checks
// -------------------------------------------------------------------------

TEST(MatrixMarketWrite, RejectsColumnOutOfRangeBeforeWriting) {
  const sf::CsrPattern<int32_t> pattern(2, 3, {0, 1, 2}, {0, 3});
  std::stringstream stream;
  const std::string message =
      error_message([&] { sf::write_matrix_market(stream, pattern.view()); });
  EXPECT_NE(message.find("col_idx[1] = 3 is out of range [0, 3) (row 1)"), std::string::npos)
      << message;
  EXPECT_TRUE(stream.str().empty());
}

TEST(MatrixMarketWrite, RejectsDecreasingRowPtr) {
  const sf::CsrPattern<int64_t> pattern(2, 3, {0, 2, 1}, {0, 1});
  std::stringstream stream;
  const std::string message =
      error_message([&] { sf::write_matrix_market(stream, pattern.view()); });
  EXPECT_NE(message.find("row_ptr[2] = 1 < row_ptr[1] = 2"), std::string::npos) << message;
}

TEST(MatrixMarketWrite, RejectsUnsortedColumns) {
  const sf::CsrPattern<int64_t> pattern(1, 3, {0, 2}, {2, 1});
  std::stringstream stream;
  const std::string message =
      error_message([&] { sf::write_matrix_market(stream, pattern.view()); });
  EXPECT_NE(message.find("columns must strictly increase in row 0"), std::string::npos) << message;
}

TEST(MatrixMarketWrite, RejectsInfInDenseAndNegativeShape) {
  const std::vector<float> dense = {1.0f, std::numeric_limits<float>::infinity()};
  std::stringstream stream;
  const std::string inf =
      error_message([&] { sf::write_matrix_market_dense(stream, dense.data(), 1, 2); });
  EXPECT_NE(inf.find("dense[1] = inf is not finite"), std::string::npos) << inf;
  const std::string negative =
      error_message([&] { sf::write_matrix_market_dense(stream, dense.data(), -1, 2); });
  EXPECT_NE(negative.find("negative shape -1 x 2"), std::string::npos) << negative;
  EXPECT_TRUE(stream.str().empty());
}
