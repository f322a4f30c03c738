// Matrix Market readers against headers that lie about the shape (found by fuzzing): each is
// refused with a FormatError naming the line, the field, the value and the limit or expectation,
// in well under a second and without the memory its shape would take. Also the values a double
// cannot hold exactly (integers beyond 2^53, duplicate sums that overflow), and valid files read
// the same with any limits that admit them.
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sparse_formats/matrix_market.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

namespace sf = sparse_formats;
using formats_testing::expect_cheap_refusal;
using formats_testing::peak_rss_bytes;
using formats_testing::throws_with;

sf::MatrixMarketData parse(const std::string& text, const sf::ReadLimits& limits = {},
                           sf::DuplicatePolicy duplicates = sf::DuplicatePolicy::sum) {
  std::istringstream in(text);
  return sf::read_matrix_market(in, "test.mtx", duplicates, limits);
}


const std::string kPattern = "%%MatrixMarket matrix coordinate pattern general\n";
const std::string kReal = "%%MatrixMarket matrix coordinate real general\n";
const std::string kInteger = "%%MatrixMarket matrix coordinate integer general\n";

// ---- declared row counts past the default limit (2^24) ------------------------------------------

TEST(FormatsReadLimits, FuzzedHeaderOf358119666RowsIsRefused) {
  // The fuzzer's file: before, 2.8 GB of row offsets were allocated and zeroed, then returned.
  expect_cheap_refusal([] { parse(kPattern + "358119666 126663 0\n"); },
                       {"test.mtx:2: row count 358119666 exceeds the limit of 16777216 rows",
                        "ReadLimits::max_rows", "358119666 x 8 bytes = 2864957328 bytes"});
}

TEST(FormatsReadLimits, HeaderOfTenToTheNineRowsIsRefused) {
  // Before: 7.8 GB and 30 s.
  expect_cheap_refusal([] { parse(kPattern + "1000000000 1 0\n"); },
                       {"test.mtx:2: row count 1000000000 exceeds the limit of 16777216 rows"});
}

TEST(FormatsReadLimits, HeaderOfTenToTheTwelveRowsIsRefused) {
  // Before: a bare std::bad_alloc, which throws_with reports as "threw something else".
  expect_cheap_refusal([] { parse(kReal + "1000000000000 3 1\n1 1 1.5\n"); },
                       {"test.mtx:2: row count 1000000000000 exceeds the limit of 16777216 rows",
                        "8000000000000 bytes"});
}

TEST(FormatsReadLimits, ColumnCountIsBoundedOnlyByAnExpectation) {
  // Columns cost the reader nothing: a 2 x 10^12 file with one entry is a tiny CSR.
  const int64_t rss_before = peak_rss_bytes();
  const auto wide = parse(kPattern + "2 1000000000000 1\n1 7\n");
  EXPECT_LT(peak_rss_bytes() - rss_before, int64_t{64} << 20);
  EXPECT_EQ(wide.num_cols, 1000000000000);
  EXPECT_EQ(wide.csr.pattern.row_ptr, (std::vector<int64_t>{0, 1, 1}));
  expect_cheap_refusal(
      [] { parse(kPattern + "2 1000000000000 1\n1 7\n", sf::ReadLimits::shape(2, 512)); },
      {"test.mtx:2: column count 1000000000000 does not match the expected 512"});
}

TEST(FormatsReadLimits, ArrayShapesAreBoundedToo) {
  // No values to hold, but read_mask_mtx's CSR would hold num_rows + 1 offsets.
  expect_cheap_refusal([] { parse("%%MatrixMarket matrix array real general\n1000000000000 0\n"); },
                       {"test.mtx:2: row count 1000000000000 exceeds the limit of 16777216"});
}

TEST(FormatsReadLimits, TheLimitIsInclusiveAndAdjustable) {
  sf::ReadLimits four;
  four.max_rows = 4;
  EXPECT_EQ(parse(kPattern + "4 4 1\n4 4\n", four).csr.pattern.row_ptr,
            (std::vector<int64_t>{0, 0, 0, 0, 1}));
  EXPECT_TRUE(throws_with([&] { parse(kPattern + "5 4 1\n5 4\n", four); },
                          {"test.mtx:2: row count 5 exceeds the limit of 4 rows"}));
  sf::ReadLimits negative;
  negative.max_rows = -1;
  EXPECT_TRUE(throws_with([&] { parse(kPattern + "1 1 0\n", negative); },
                          {"test.mtx: ReadLimits::max_rows = -1 must be >= 0"}));
}

// ---- expected shapes ----------------------------------------------------------------------------

TEST(FormatsReadLimits, ExpectedShapeMismatchIsRefusedAtTheSizeLine) {
  const auto expect_512 = sf::ReadLimits::shape(512, 512);
  EXPECT_TRUE(throws_with([&] { parse(kPattern + "512 500 0\n", expect_512); },
                          {"test.mtx:2: column count 500 does not match the expected 512",
                           "ReadLimits::expected_cols"}));
  // Refused at line 2, before the entries (the entry count alone is a lie caught at line 3).
  expect_cheap_refusal(
      [&] { parse(kPattern + "1000000000000 512 100000000000000\n1 1\n", expect_512); },
      {"test.mtx:2: row count 1000000000000 does not match the expected 512",
       "ReadLimits::expected_rows"});
}

TEST(FormatsReadLimits, AnExpectedRowCountBypassesTheLimitAndAnyExtentDoesNot) {
  sf::ReadLimits expected = sf::ReadLimits::shape(6, sf::kAnyExtent);
  expected.max_rows = 4;
  const auto data = parse(kPattern + "6 3 1\n6 2\n", expected);
  EXPECT_EQ(data.csr.pattern.row_ptr, (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1}));
  sf::ReadLimits any = sf::ReadLimits::shape(sf::kAnyExtent, 3);
  any.max_rows = 4;
  EXPECT_TRUE(throws_with([&] { parse(kPattern + "6 3 1\n6 2\n", any); },
                          {"test.mtx:2: row count 6 exceeds the limit of 4 rows"}));
}

TEST(FormatsReadLimits, FileReadersTakeLimitsAndNameTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "spattn_formats_read_limits.mtx";
  std::ofstream(path) << kPattern << "3 4 2\n1 4\n3 1\n";
  EXPECT_TRUE(
      throws_with([&] { sf::read_mask_mtx<int32_t>(path.string(), sf::ReadLimits::shape(3, 5)); },
                  {path.string() + ":2: column count 4 does not match the expected 5"}));
  EXPECT_TRUE(
      throws_with([&] { sf::read_csr_mtx<int64_t>(path.string(), sf::ReadLimits::shape(2, 4)); },
                  {path.string() + ":2: row count 3 does not match the expected 2"}));
  const auto mask = sf::read_mask_mtx<int32_t>(path.string(), sf::ReadLimits::shape(3, 4));
  EXPECT_EQ(mask.row_ptr, (std::vector<int32_t>{0, 1, 1, 2}));
  EXPECT_EQ(mask.col_idx, (std::vector<int32_t>{3, 0}));
  std::filesystem::remove(path);
}

// ---- an array with no rows and 5.5e18 columns ---------------------------------------------------

TEST(FormatsReadLimits, ArrayWithNoRowsDoesNotLoopOverItsColumns) {
  // A valid file (no values): before, the column-major to row-major loop ran once per declared
  // column, about 5.5e18 times (optimizers may drop that empty loop; the fuzzer's unoptimized
  // builds ran it). A regression hangs here, and ctest's timeout fails it.
  const auto data = parse("%%MatrixMarket matrix array real general\n0 5555555555555555525\n");
  EXPECT_EQ(data.num_rows, 0);
  EXPECT_EQ(data.num_cols, 5555555555555555525);
  EXPECT_TRUE(data.dense.empty());
}

// ---- values a double cannot hold ----------------------------------------------------------------

TEST(FormatsReadLimits, IntegerBeyondTwoToThe53IsRefused) {
  // 2^53 + 1 would be read as 2^53.
  EXPECT_TRUE(throws_with([] { parse(kInteger + "2 2 2\n1 1 5\n2 2 9007199254740993\n"); },
                          {"test.mtx:4: entry 2: integer value 9007199254740993 lies beyond "
                           "+-2^53 = +-9007199254740992"}));
  EXPECT_TRUE(throws_with(
      [] { parse("%%MatrixMarket matrix array integer general\n1 1\n-9007199254740993\n"); },
      {"test.mtx:3: entry 1: integer value -9007199254740993 lies beyond"}));
  // +-2^53 itself is exact.
  const auto data = parse(kInteger + "1 2 2\n1 1 9007199254740992\n1 2 -9007199254740992\n");
  EXPECT_EQ(data.csr.values, (std::vector<double>{9007199254740992.0, -9007199254740992.0}));
}

TEST(FormatsReadLimits, DuplicatesSummingToInfAreRefused) {
  EXPECT_TRUE(throws_with(
      [] { parse(kReal + "2 2 3\n1 1 1e308\n2 2 1\n1 1 1e308\n"); },
      {"test.mtx:5: duplicate entries (1, 1) at lines 3 and 5 sum to inf", "not finite"}));
  EXPECT_TRUE(throws_with([] { parse(kReal + "2 2 3\n1 1 -1e308\n1 1 -1e308\n1 1 1e308\n"); },
                          {"test.mtx:4: duplicate entries (1, 1) at lines 3 and 4 sum to -inf"}));
  // Under `last` nothing is summed; summing to a finite value is fine.
  EXPECT_EQ(
      parse(kReal + "2 2 2\n1 1 1e308\n1 1 1e308\n", {}, sf::DuplicatePolicy::last).csr.values,
      (std::vector<double>{1e308}));
  EXPECT_EQ(parse(kReal + "2 2 2\n1 1 1e308\n1 1 -1e308\n").csr.values, (std::vector<double>{0}));
}

TEST(FormatsReadLimits, IntegerDuplicatesSummingBeyondTwoToThe53AreRefused) {
  EXPECT_TRUE(throws_with(
      [] { parse(kInteger + "2 2 3\n1 1 9007199254740992\n1 1 1\n1 1 1\n"); },
      {"test.mtx:4: duplicate entries (1, 1) at lines 3 and 4 sum to", "beyond +-2^53"}));
}

// ---- valid files read as before -----------------------------------------------------------------

TEST(FormatsReadLimits, ValidFilesReadIdenticallyWithAnyAdmittingLimits) {
  const std::vector<std::string> files = {
      kReal + "% comment\n3 4 5\n3 1 -2.5\n1 4 1e-3\n1 2 +7\n3 3 0.25\n1 2 1\n",
      kInteger + "2 2 2\n2 2 -9\n1 1 12\n",
      "%%MatrixMarket matrix coordinate real symmetric\n3 3 4\n1 1 1\n2 1 2\n3 2 4\n3 3 5\n",
      kPattern + "2 3 3\n2 3\n1 1\n2 3\n",
      "%%MatrixMarket matrix array real general\n2 3\n1\n4\n2\n5\n3\n6\n",
      kPattern + "0 0 0\n"};
  for (const std::string& text : files) {
    const auto plain = parse(text);
    for (const sf::ReadLimits& limits :
         {sf::ReadLimits::shape(plain.num_rows, plain.num_cols),
          sf::ReadLimits::shape(sf::kAnyExtent, plain.num_cols), sf::ReadLimits{-1, -1, 4}}) {
      const auto limited = parse(text, limits);
      EXPECT_EQ(limited.num_rows, plain.num_rows) << text;
      EXPECT_EQ(limited.num_cols, plain.num_cols) << text;
      EXPECT_EQ(limited.csr.pattern.row_ptr, plain.csr.pattern.row_ptr) << text;
      EXPECT_EQ(limited.csr.pattern.col_idx, plain.csr.pattern.col_idx) << text;
      EXPECT_EQ(limited.csr.values, plain.csr.values) << text;
      EXPECT_EQ(limited.dense, plain.dense) << text;
    }
  }
  // And the values themselves, by hand: duplicates (1, 2) summed, the array transposed.
  const auto real = parse(files[0]);
  EXPECT_EQ(real.csr.pattern.row_ptr, (std::vector<int64_t>{0, 2, 2, 4}));
  EXPECT_EQ(real.csr.pattern.col_idx, (std::vector<int64_t>{1, 3, 0, 2}));
  EXPECT_EQ(real.csr.values, (std::vector<double>{8.0, 1e-3, -2.5, 0.25}));
  EXPECT_EQ(parse(files[4]).dense, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(parse(files[2]).csr.values, (std::vector<double>{1, 2, 2, 4, 4, 5}));
}

}  // namespace
