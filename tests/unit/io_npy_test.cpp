// NumPy .npy reading and writing: exact round trips, the exact bytes numpy writes, and one test per
// malformed file (bytes built here) checking that the message names the source and the field.
#include <sparse_formats/error.hpp>
#include <sparse_formats/npy.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace sf = sparse_formats;
namespace fs = std::filesystem;

namespace {

// A .npy file with the given header dict, padded like numpy pads it, followed by `data`.
std::string npy_bytes(const std::string& dict, const std::string& data, int major = 1) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  const std::size_t unpadded = 8 + length_bytes + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i)
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& values) {  // the tests run on little-endian hosts
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
sf::NpyArrayT<T> read_bytes(const std::string& bytes) {
  std::istringstream in(bytes);
  return sf::read_npy<T>(in, "test.npy");
}

void expect_read_error(const std::string& bytes, std::initializer_list<const char*> parts) {
  try {
    read_bytes<double>(bytes);
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("test.npy: ", 0), 0u) << message;
    for (const char* part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

const std::string kF8Header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
const std::string kTwoDoubles = raw(std::vector<double>{1.5, -2.0});

template <typename T>
std::vector<T> tricky_values(std::size_t count) {
  std::vector<T> values(count);
  for (std::size_t i = 0; i < count; ++i)
    values[i] = static_cast<T>(1.0 / (static_cast<double>(i) + 3.0));
  const T specials[] = {T(-0.0), std::numeric_limits<T>::denorm_min(),
                        std::numeric_limits<T>::max(), std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN()};
  for (std::size_t i = 0; i < count && i < 5; ++i) values[i] = specials[i];
  return values;
}

class NpyFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto tag = std::chrono::steady_clock::now().time_since_epoch().count();
    dir_ = fs::temp_directory_path() / ("spattn_io_npy_" + std::to_string(tag));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  int64_t files_in_dir() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  }

  template <typename T>
  void round_trip(const std::vector<int64_t>& shape) {
    int64_t count = 1;
    for (const int64_t dim : shape) count *= dim;
    const std::vector<T> values = tricky_values<T>(static_cast<std::size_t>(count));
    sf::write_npy(path("a.npy"), values.data(), shape);
    const auto array = sf::read_npy<T>(path("a.npy"));
    EXPECT_EQ(array.shape, shape);
    ASSERT_EQ(array.size(), count);
    if (count > 0) {  // memcmp must not see the null data() of empty vectors
      EXPECT_EQ(std::memcmp(array.data.data(), values.data(), values.size() * sizeof(T)), 0);
    }
    EXPECT_EQ(fs::file_size(path("a.npy")) % 64, static_cast<uintmax_t>(count * sizeof(T)) % 64);
  }

  fs::path dir_;
};

}  // namespace

// ---- round trips
// ---------------------------------------------------------------------------------

TEST_F(NpyFiles, DoubleRanksZeroToFourAreBitExact) {
  round_trip<double>({});
  round_trip<double>({7});
  round_trip<double>({7, 97});
  round_trip<double>({3, 1, 257});
  round_trip<double>({2, 3, 5, 7});
}

TEST_F(NpyFiles, FloatRanksZeroToFourAreBitExact) {
  round_trip<float>({});
  round_trip<float>({257});
  round_trip<float>({97, 7});
  round_trip<float>({1, 1, 1});
  round_trip<float>({2, 1, 3, 5});
}

TEST_F(NpyFiles, EmptyArrays) {
  round_trip<double>({0, 3});
  round_trip<float>({0});
  round_trip<double>({4, 0, 2});
  sf::write_npy<double>(path("null.npy"), nullptr, {0, 3});
  const auto array = sf::read_npy<double>(path("null.npy"));
  EXPECT_EQ(array.shape, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(array.data.empty());
}

TEST(Npy, WritesExactlyWhatNumpyWrites) {
  const std::vector<double> values = {1, 2, 3, 4, 5, 6};
  std::ostringstream out;
  sf::write_npy(out, values.data(), {2, 3});
  EXPECT_EQ(out.str(),
            npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", raw(values)));
  EXPECT_EQ(out.str().size(), 128u + 48u);  // 128-byte header (preamble + dict, padded), 48 data

  const std::vector<float> one = {0.5f};
  std::ostringstream scalar;
  sf::write_npy(scalar, one.data(), {});
  EXPECT_EQ(scalar.str(),
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", raw(one)));
  // A 64-byte aligned header ending in '\n': 10-byte preamble + 118-byte dict.
  const std::string bytes = scalar.str();
  const auto header_bytes = static_cast<std::size_t>(static_cast<unsigned char>(bytes[8]) |
                                                     (static_cast<unsigned char>(bytes[9]) << 8));
  EXPECT_EQ(header_bytes, 118u);
  EXPECT_EQ(bytes[10 + header_bytes - 1], '\n');
  EXPECT_EQ(bytes.size(), 128u + 4u);
}

TEST(Npy, ReadsVersions2And3AndDoubleQuotes) {
  for (const int major : {2, 3}) {
    const auto array = read_bytes<double>(npy_bytes(kF8Header, kTwoDoubles, major));
    EXPECT_EQ(array.data, (std::vector<double>{1.5, -2.0}));
  }
  const auto quoted = read_bytes<double>(
      npy_bytes("{\"shape\": (1, 2), \"fortran_order\": False, \"descr\": \"<f8\"}", kTwoDoubles));
  EXPECT_EQ(quoted.shape, (std::vector<int64_t>{1, 2}));
}

TEST(Npy, ReadsHalfPrecisionExactly) {
  // By hand: 0x3c00 = 1, 0xc000 = -2, 0x3555 = 0.333251953125 (1 + 341/1024, times 2^-2),
  // 0x0001 = 2^-24 (the smallest subnormal), 0x7bff = 65504 (the largest finite), 0x7c00 = inf.
  const std::vector<uint16_t> bits = {0x3c00, 0xc000, 0x3555, 0x0001, 0x7bff, 0x7c00};
  std::string data;
  for (uint16_t b : bits) data += {static_cast<char>(b & 0xff), static_cast<char>(b >> 8)};
  const std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }";
  const std::vector<double> expected = {1.0, -2.0, 0.333251953125, std::ldexp(1.0, -24), 65504.0, INFINITY};
  const auto wide = read_bytes<double>(npy_bytes(header, data));
  EXPECT_EQ(wide.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(wide.data, expected);
  EXPECT_EQ(read_bytes<float>(npy_bytes(header, data)).data, std::vector<float>(expected.begin(), expected.end()));
}

TEST(Npy, ConvertsBetweenFloatAndDouble) {
  const auto widened =
      read_bytes<double>(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                   raw(std::vector<float>{0.1f, -3.0f})));
  EXPECT_EQ(widened.data, (std::vector<double>{static_cast<double>(0.1f), -3.0}));
  const auto narrowed =
      read_bytes<float>(npy_bytes(kF8Header, raw(std::vector<double>{0.1, 1e-50})));
  EXPECT_EQ(narrowed.data, (std::vector<float>{0.1f, 0.0f}));
  const auto inf = read_bytes<float>(
      npy_bytes(kF8Header, raw(std::vector<double>{std::numeric_limits<double>::infinity(), 1.0})));
  EXPECT_TRUE(std::isinf(inf.data[0]));
}

// ---- malformed files: one test per failure
// -------------------------------------------------------

TEST(NpyMalformed, DoubleOutOfFloatRange) {
  try {
    read_bytes<float>(npy_bytes(kF8Header, raw(std::vector<double>{1.0, -1e300})));
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("value -1e+300 at flat index 1 is out of float range"),
              std::string::npos)
        << error.what();
  }
}

TEST(NpyMalformed, TooShort) { expect_read_error("\x93NUMPY", {"too short", "6 bytes"}); }

TEST(NpyMalformed, BadMagic) {
  expect_read_error("\x93NUMPZ\x01\x00\x10\x00" + std::string(16, ' '), {"bad magic"});
}

TEST(NpyMalformed, UnsupportedVersion) {
  std::string bytes = npy_bytes(kF8Header, kTwoDoubles);
  bytes[6] = 4;
  expect_read_error(bytes, {"unsupported .npy format version 4.0"});
}

TEST(NpyMalformed, HeaderTooLong) {
  std::string bytes = npy_bytes(kF8Header, kTwoDoubles, 2);
  bytes[8] = 0x01;  // header length 0x00010001 = 65537
  bytes[9] = 0x00;
  bytes[10] = 0x01;
  expect_read_error(bytes, {"header length 65537 exceeds the limit of 65536 bytes"});
}

TEST(NpyMalformed, HeaderTruncated) {
  expect_read_error(npy_bytes(kF8Header, "").substr(0, 40),
                    {"header truncated", "declares 118 bytes"});
}

TEST(NpyMalformed, NotADict) {
  expect_read_error(npy_bytes("['descr', '<f8']", ""), {"malformed .npy header", "expected '{'"});
}

TEST(NpyMalformed, MissingShape) {
  expect_read_error(npy_bytes("{'descr': '<f8', 'fortran_order': False}", ""),
                    {"missing key 'shape'"});
}

TEST(NpyMalformed, ExtraKey) {
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'x': 1}", kTwoDoubles),
      {"unexpected key 'x'"});
}

TEST(NpyMalformed, RepeatedKey) {
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (2,)}",
                kTwoDoubles),
      {"key 'descr' appears twice"});
}

TEST(NpyMalformed, UnterminatedString) {
  expect_read_error(npy_bytes("{'descr: <f8}", ""), {"unterminated string"});
}

TEST(NpyMalformed, BigEndian) {
  expect_read_error(
      npy_bytes("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", kTwoDoubles),
      {"header field 'descr' = '>f8'", "big-endian"});
}

TEST(NpyMalformed, IntegerDtype) {
  expect_read_error(
      npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
      {"header field 'descr' = '<i4'", "unsupported dtype"});
}

TEST(NpyMalformed, BigEndianHalfPrecision) {
  expect_read_error(
      npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0')),
      {"'descr' = '>f2'", "only '<f2', '<f4' and '<f8'"});
}

TEST(NpyMalformed, HalfPrecisionDataOfTheWrongSize) {
  expect_read_error(
      npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", std::string(4, '\0')),
      {"data is 4 bytes but shape (3,) of '<f2' needs 6 bytes (file truncated)"});
}

TEST(NpyMalformed, ObjectArray) {
  expect_read_error(
      npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')),
      {"'descr' = '|O'", "object arrays"});
}

TEST(NpyMalformed, StructuredDtype) {
  expect_read_error(
      npy_bytes("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,), }", kTwoDoubles),
      {"'descr'", "structured dtypes"});
}

TEST(NpyMalformed, FortranOrder) {
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2,), }", kTwoDoubles),
      {"header field 'fortran_order' = True", "Fortran-order"});
}

TEST(NpyMalformed, FortranOrderNotABool) {
  expect_read_error(npy_bytes("{'descr': '<f8', 'fortran_order': 0, 'shape': (2,), }", kTwoDoubles),
                    {"'fortran_order' must be True or False, found '0'"});
}

TEST(NpyMalformed, NegativeDimension) {
  expect_read_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2, -3), }", ""),
                    {"'shape'", "negative dimension"});
}

TEST(NpyMalformed, NonIntegerDimension) {
  expect_read_error(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (2.5,), }", ""),
                    {"'shape' must be a tuple of integers"});
}

TEST(NpyMalformed, DimensionOverflowingInt64) {
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
      {"'shape'", "overflows int64"});
}

TEST(NpyMalformed, ElementCountOverflow) {
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (10000000000, 10000000000), }",
                ""),
      {"shape (10000000000, 10000000000) has too many elements"});
}

TEST(NpyMalformed, LyingShapeFailsBeforeAllocating) {
  // 10^16 elements (80 PB) fit int64 but not the file: rejected by the size check.
  expect_read_error(
      npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (100000000, 100000000), }",
                kTwoDoubles),
      {"data is 16 bytes but shape (100000000, 100000000) of '<f8' needs 80000000000000000 bytes",
       "truncated"});
}

TEST(NpyMalformed, TruncatedData) {
  expect_read_error(npy_bytes(kF8Header, kTwoDoubles.substr(0, 12)),
                    {"data is 12 bytes but shape (2,) of '<f8' needs 16 bytes (file truncated)"});
}

TEST(NpyMalformed, TrailingBytes) {
  expect_read_error(npy_bytes(kF8Header, kTwoDoubles + "xyz"),
                    {"data is 19 bytes", "(trailing bytes)"});
}

TEST_F(NpyFiles, ErrorsNameTheFile) {
  std::ofstream(path("bad.npy"), std::ios::binary)
      << npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", "abcd");
  try {
    sf::read_npy<float>(path("bad.npy"));
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    EXPECT_EQ(
        std::string(error.what()).rfind(path("bad.npy") + ": .npy header field 'descr' = '>f4'", 0),
        0u)
        << error.what();
  }
  try {
    sf::read_npy<double>(path("missing.npy"));
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("missing.npy: cannot open"), std::string::npos)
        << error.what();
  }
}

TEST_F(NpyFiles, FailedWriteLeavesTheOldFileAndNoTemporary) {
  const std::vector<double> values = {1.0, 2.0};
  sf::write_npy(path("a.npy"), values.data(), {2});
  try {
    sf::write_npy<double>(path("a.npy"), nullptr, {3});
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("data is null for shape (3,)"), std::string::npos)
        << error.what();
  }
  try {
    sf::write_npy(path("a.npy"), values.data(), {2, -1});
    ADD_FAILURE() << "no FormatError";
  } catch (const sf::FormatError& error) {
    EXPECT_NE(std::string(error.what()).find("negative dimension 1"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(sf::read_npy<double>(path("a.npy")).data, values);
  EXPECT_EQ(files_in_dir(), 1);
}
