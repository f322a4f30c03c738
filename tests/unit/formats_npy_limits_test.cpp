// The .npy reader against headers that declare more than the file holds: refused before the data
// is allocated, naming the field and the value, in well under a second and without the memory the
// shape would take; shapes whose element or byte count overflows; expected shapes; and valid files
// read the same with any limits that admit them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <sparse_formats/npy.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

namespace sf = sparse_formats;
using formats_testing::expect_cheap_refusal;
using formats_testing::peak_rss_bytes;
using formats_testing::throws_with;

// A version 1.0 .npy file: preamble, the header dict padded with spaces to 64 bytes, then `data`.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  return bytes + header + data;
}

std::string f8_dict(const std::string& shape) {
  return "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::string doubles(const std::vector<double>& values) {  // the tests run on little-endian hosts
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

sf::NpyArrayT<double> read(const std::string& bytes, const sf::NpyReadLimits& limits = {}) {
  std::istringstream in(bytes);
  return sf::read_npy<double>(in, "test.npy", limits);
}


TEST(FormatsNpyLimits, ShapeLargerThanTheDataIsRefusedBeforeAllocating) {
  // 10^12 elements (8 TB) declared over 16 bytes of data: refused by comparing the two.
  expect_cheap_refusal(
      [] {
        read(npy_bytes(f8_dict("(1000000000000,)"), doubles({1, 2})));
      },
      {"test.npy: data is 16 bytes but shape (1000000000000,) of '<f8' needs 8000000000000 bytes",
       "(file truncated)"});
  expect_cheap_refusal([] { read(npy_bytes(f8_dict("(100000, 100000, 100000)"), doubles({1}))); },
                       {"data is 8 bytes but shape (100000, 100000, 100000) of '<f8' needs "
                        "8000000000000000 bytes"});
}

TEST(FormatsNpyLimits, HeaderLengthPastTheEndOfTheFileIsRefused) {
  // The preamble declares a 60000-byte header; the file has 60 bytes after it.
  std::string bytes = npy_bytes(f8_dict("(2,)"), doubles({1, 2}));
  bytes[8] = static_cast<char>(60000 & 0xff);
  bytes[9] = static_cast<char>(60000 >> 8);
  expect_cheap_refusal([&] { read(bytes); },
                       {"test.npy: .npy header truncated (declares 60000 bytes, file has "});
}

TEST(FormatsNpyLimits, ElementCountOverflowIsRefused) {
  // 2^32 * 2^32 elements overflow int64; 2^61 elements of 8 bytes overflow the byte count; a
  // zero dimension after an overflowing prefix is refused too (the prefix alone overflows).
  EXPECT_TRUE(throws_with(
      [] { read(npy_bytes(f8_dict("(4294967296, 4294967296)"), "")); },
      {"test.npy: shape (4294967296, 4294967296) has too many elements", "overflows int64"}));
  EXPECT_TRUE(throws_with(
      [] { read(npy_bytes(f8_dict("(2305843009213693952,)"), "")); },
      {"shape (2305843009213693952,) has too many elements", "at 8 bytes each overflows int64"}));
  EXPECT_TRUE(throws_with([] { read(npy_bytes(f8_dict("(3037000500, 3037000500, 0)"), "")); },
                          {"shape (3037000500, 3037000500, 0) has too many elements"}));
  // A zero dimension first keeps the count at 0: a valid empty array.
  EXPECT_EQ(read(npy_bytes(f8_dict("(0, 3037000500, 3037000500)"), "")).size(), 0);
}

TEST(FormatsNpyLimits, ExpectedShapeMismatchIsRefusedAfterTheHeader) {
  const std::string bytes = npy_bytes(f8_dict("(2, 3)"), doubles({1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(throws_with(
      [&] {
        read(bytes, sf::NpyReadLimits::shape({2, 4}));
      },
      {"test.npy: .npy header field 'shape' = (2, 3) does not match the "
       "expected (2, 4)",
       "NpyReadLimits::expected_shape"}));
  EXPECT_TRUE(throws_with([&] { read(bytes, sf::NpyReadLimits::shape({6})); },
                          {"'shape' = (2, 3) does not match the expected (6,)"}));
  EXPECT_TRUE(throws_with([&] { read(bytes, sf::NpyReadLimits::shape({})); },
                          {"'shape' = (2, 3) does not match the expected ()"}));
  // Checked before the data: a lying shape that is also unexpected is named as unexpected.
  expect_cheap_refusal(
      [] { read(npy_bytes(f8_dict("(1000000000000,)"), ""), sf::NpyReadLimits::shape({16})); },
      {"'shape' = (1000000000000,) does not match the expected (16,)"});
}

TEST(FormatsNpyLimits, ValidFilesReadIdenticallyWithAnyAdmittingLimits) {
  const std::vector<double> values = {1.5, -2, 0, 3e-300, 7, 8};
  const std::string bytes = npy_bytes(f8_dict("(2, 3)"), doubles(values));
  const auto plain = read(bytes);
  EXPECT_EQ(plain.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(plain.data, values);
  for (const sf::NpyReadLimits& limits :
       {sf::NpyReadLimits::shape({2, 3}), sf::NpyReadLimits::shape({sf::kAnyExtent, 3}),
        sf::NpyReadLimits::shape({sf::kAnyExtent, sf::kAnyExtent}), sf::NpyReadLimits{}}) {
    const auto limited = read(bytes, limits);
    EXPECT_EQ(limited.shape, plain.shape);
    EXPECT_EQ(limited.data, plain.data);
  }
  // 0-d: one element, shape ().
  const auto scalar = read(npy_bytes(f8_dict("()"), doubles({4.25})), sf::NpyReadLimits::shape({}));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.data, (std::vector<double>{4.25}));
}

}  // namespace
