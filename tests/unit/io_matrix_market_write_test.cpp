// Matrix Market writing: round trips (bit-exact values), the file writers (all or nothing, named
// paths and lines) and the writer's input checks. Reading: io_matrix_market_test.cpp.
#include "support/matrix_market_checks.hpp"

#include <fstream>
#include <limits>
#include <vector>

namespace {

using namespace spattn::testing::matrix_market_checks;

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

}  // namespace
