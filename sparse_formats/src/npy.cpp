// NumPy .npy reading and writing. Elements are decoded / encoded byte by byte as little-endian,
// so the code does not depend on the host's byte order; data moves in bounded chunks.
#include <sparse_formats/npy.hpp>

#include <sparse_formats/float16.hpp>

#include <sparse_formats/error.hpp>

#include "atomic_file.hpp"
#include "format_internal.hpp"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <istream>
#include <limits>
#include <ostream>
#include <string_view>
#include <type_traits>

namespace sparse_formats {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicBytes = 6;
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 16;
constexpr std::size_t kChunkElements = std::size_t{1} << 16;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

struct NpyHeader {
  int64_t item_bytes = 0;  // 2 ('<f2'), 4 ('<f4') or 8 ('<f8')
  std::vector<int64_t> shape;
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + (shape.size() == 1 ? ",)" : ")");
}

// Element count of a shape; fails on negative dimensions or overflow (of count * item_bytes too).
int64_t element_count(const std::vector<int64_t>& shape, int64_t item_bytes,
                      const std::string& where) {
  int64_t count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) fail(where, ": shape ", shape_text(shape), " has a negative dimension ", i);
    if (shape[i] > 0 && count > kInt64Max / item_bytes / shape[i]) {
      fail(where, ": shape ", shape_text(shape), " has too many elements (their byte count at ",
           item_bytes, " bytes each overflows int64, the limit of any file's size)");
    }
    count *= shape[i];
  }
  return count;
}

// Recursive-descent parser for the header's Python dict literal, e.g.
//   {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (!peek_is('}')) {
      const std::string key = parse_string("a key");
      expect(':');
      if (key == "descr") {
        if (seen_descr) error("key 'descr' appears twice");
        seen_descr = true;
        header.item_bytes = parse_descr();
      } else if (key == "fortran_order") {
        if (seen_order) error("key 'fortran_order' appears twice");
        seen_order = true;
        parse_fortran_order();
      } else if (key == "shape") {
        if (seen_shape) error("key 'shape' appears twice");
        seen_shape = true;
        header.shape = parse_shape();
      } else {
        error("unexpected key '", key, "' (expected only 'descr', 'fortran_order', 'shape')");
      }
      if (!peek_is(',')) break;
      expect(',');
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) error("unexpected text after the closing '}' at offset ", pos_);
    if (!seen_descr) error("missing key 'descr'");
    if (!seen_order) error("missing key 'fortran_order'");
    if (!seen_shape) error("missing key 'shape'");
    return header;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(source_, ": malformed .npy header: ", std::forward<Parts>(parts)..., " in \"",
         text_.substr(0, 120), "\"");
  }
  template <typename... Parts>
  [[noreturn]] void field_error(const char* field, const std::string& value,
                                Parts&&... parts) const {
    fail(source_, ": .npy header field '", field, "' = ", value, ": ",
         std::forward<Parts>(parts)...);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek_is(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  void expect(char c) {
    if (!peek_is(c)) {
      if (pos_ >= text_.size()) error("expected '", c, "' but the header ends");
      error("expected '", c, "' at offset ", pos_, ", found '", text_[pos_], "'");
    }
    ++pos_;
  }
  std::string parse_string(const char* what) {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      error("expected ", what, " (a quoted string) at offset ", pos_);
    }
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) error("unterminated string starting at offset ", pos_ - 1);
    std::string value(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return value;
  }
  std::string parse_word() {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  int64_t parse_descr() {
    skip_space();
    if (pos_ < text_.size() && (text_[pos_] == '[' || text_[pos_] == '{')) {
      field_error("descr", "[...]", "structured dtypes are not supported (only '<f2', '<f4' and '<f8')");
    }
    const std::string descr = parse_string("the 'descr' value");
    const std::string quoted = "'" + descr + "'";
    if (descr == "<f8") return 8;
    if (descr == "<f4") return 4;
    if (descr == "<f2") return 2;
    if (descr.size() > 1 && descr[0] == '>') {
      field_error("descr", quoted, "big-endian data is not supported (only '<f2', '<f4' and '<f8')");
    }
    if (descr.size() > 1 && descr[1] == 'O') {
      field_error("descr", quoted, "object arrays are not supported (only '<f2', '<f4' and '<f8')");
    }
    field_error("descr", quoted, "unsupported dtype (only '<f2', '<f4' and '<f8')");
  }

  void parse_fortran_order() {
    const std::string word = parse_word();
    if (word == "False") return;
    if (word == "True") {
      field_error("fortran_order", "True", "Fortran-order arrays are not supported (save C order)");
    }
    error("'fortran_order' must be True or False, found '", word, "'");
  }

  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    while (!peek_is(')')) {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] != ',' && text_[pos_] != ')' &&
             !std::isspace(static_cast<unsigned char>(text_[pos_]))) {
        ++pos_;
      }
      const std::string token(text_.substr(start, pos_ - start));
      const bool negative = !token.empty() && token[0] == '-';
      const std::string digits = negative ? token.substr(1) : token;
      if (digits.empty() ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        error("'shape' must be a tuple of integers, found '", token, "' at offset ", start);
      }
      if (negative) field_error("shape", shape_text(shape) + " ... " + token, "negative dimension");
      int64_t dim = 0;
      for (const char c : digits) {
        if (dim > (kInt64Max - (c - '0')) / 10)
          field_error("shape", "(... " + token + " ...)", "dimension overflows int64");
        dim = dim * 10 + (c - '0');
      }
      shape.push_back(dim);
      if (!peek_is(',')) break;
      expect(',');
    }
    expect(')');
    return shape;
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

// The header's shape against the caller's expectation: same rank, same extents except where
// kAnyExtent is expected.
void check_expected_shape(const std::vector<int64_t>& shape, const NpyReadLimits& limits,
                          const std::string& source) {
  if (!limits.expected_shape) return;
  const std::vector<int64_t>& expected = *limits.expected_shape;
  bool matches = shape.size() == expected.size();
  for (std::size_t i = 0; matches && i < shape.size(); ++i) {
    matches = expected[i] == kAnyExtent || expected[i] == shape[i];
  }
  if (!matches) {
    fail(source, ": .npy header field 'shape' = ", shape_text(shape),
         " does not match the expected ", shape_text(expected),
         " (NpyReadLimits::expected_shape; -1 = any extent)");
  }
}

uint64_t little_endian_bits(const unsigned char* bytes, std::size_t count) {
  uint64_t bits = 0;
  for (std::size_t i = 0; i < count; ++i) bits |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return bits;
}

template <typename T>
T decode(const unsigned char* bytes, int64_t item_bytes, int64_t flat_index,
         const std::string& source) {
  if (item_bytes == 2) return static_cast<T>(float16_value(static_cast<uint16_t>(little_endian_bits(bytes, 2))));
  if (item_bytes == 4) {
    const auto bits = static_cast<uint32_t>(little_endian_bits(bytes, 4));
    float value;
    std::memcpy(&value, &bits, 4);
    return static_cast<T>(value);
  }
  const uint64_t bits = little_endian_bits(bytes, 8);
  double value;
  std::memcpy(&value, &bits, 8);
  if constexpr (std::is_same_v<T, float>) {
    if (std::isfinite(value) && std::fabs(value) > static_cast<double>(FLT_MAX)) {
      fail(source, ": value ", value, " at flat index ", flat_index,
           " is out of float range ('<f8' read as float)");
    }
  }
  return static_cast<T>(value);
}

template <typename T>
void encode(T value, unsigned char* bytes) {
  constexpr std::size_t size = sizeof(T);
  std::conditional_t<size == 4, uint32_t, uint64_t> bits;
  std::memcpy(&bits, &value, size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<unsigned char>(bits >> (8 * i));
}

}  // namespace

template <typename T>
NpyArrayT<T> read_npy(std::istream& in, const std::string& source_name,
                      const NpyReadLimits& limits) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "read_npy: float or double");
  const std::string& source = source_name;
  const auto start = in.tellg();
  in.seekg(0, std::ios::end);
  const auto end = in.tellg();
  in.seekg(start);
  if (start < 0 || end < 0 || !in)
    fail(source, ": cannot determine the .npy size (stream not seekable)");
  const auto total_bytes = static_cast<int64_t>(end - start);

  unsigned char preamble[12];
  if (total_bytes < 10 || !in.read(reinterpret_cast<char*>(preamble), 8)) {
    fail(source, ": too short for a .npy file (", total_bytes, " bytes)");
  }
  if (std::memcmp(preamble, kMagic, kMagicBytes) != 0)
    fail(source, ": not a .npy file (bad magic)");
  const int major = preamble[6], minor = preamble[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail(source, ": unsupported .npy format version ", major, ".", minor,
         " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (!in.read(reinterpret_cast<char*>(preamble + 8), static_cast<std::streamsize>(length_bytes))) {
    fail(source, ": truncated .npy preamble");
  }
  const uint64_t header_bytes = little_endian_bits(preamble + 8, length_bytes);
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, ": .npy header length ", header_bytes, " exceeds the limit of ", kMaxHeaderBytes,
         " bytes");
  }
  const auto data_start = static_cast<int64_t>(8 + length_bytes + header_bytes);
  if (data_start > total_bytes) {
    fail(source, ": .npy header truncated (declares ", header_bytes, " bytes, file has ",
         total_bytes - static_cast<int64_t>(8 + length_bytes), " after the preamble)");
  }
  std::string header_text(static_cast<std::size_t>(header_bytes), '\0');
  if (!in.read(header_text.data(), static_cast<std::streamsize>(header_bytes))) {
    fail(source, ": .npy header truncated");
  }
  const NpyHeader header = HeaderParser(header_text, source).parse();
  check_expected_shape(header.shape, limits, source);
  const int64_t count = element_count(header.shape, header.item_bytes, source);
  const int64_t data_bytes = total_bytes - data_start;
  if (data_bytes != count * header.item_bytes) {
    fail(source, ": data is ", data_bytes, " bytes but shape ", shape_text(header.shape), " of '<f",
         header.item_bytes, "' needs ", count * header.item_bytes, " bytes",
         data_bytes < count * header.item_bytes ? " (file truncated)" : " (trailing bytes)");
  }

  // count is now bounded by the file's size (up to four times it for '<f2' read as double).
  NpyArrayT<T> array;
  array.shape = header.shape;
  array.data = internal::allocate<T>(
      source, [&] { return "data of shape " + shape_text(header.shape); }, count);
  std::vector<unsigned char> chunk(kChunkElements * static_cast<std::size_t>(header.item_bytes));
  for (int64_t first = 0; first < count;) {
    const int64_t n = std::min(count - first, static_cast<int64_t>(kChunkElements));
    if (!in.read(reinterpret_cast<char*>(chunk.data()),
                 static_cast<std::streamsize>(n * header.item_bytes))) {
      fail(source, ": read error in the data at element ", first);
    }
    for (int64_t i = 0; i < n; ++i) {
      array.data[static_cast<std::size_t>(first + i)] =
          decode<T>(chunk.data() + i * header.item_bytes, header.item_bytes, first + i, source);
    }
    first += n;
  }
  return array;
}

template <typename T>
NpyArrayT<T> read_npy(const std::string& path, const NpyReadLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open for reading");
  return read_npy<T>(in, path, limits);
}

template <typename T>
void write_npy(std::ostream& out, const T* data, const std::vector<int64_t>& shape) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "write_npy: float or double");
  const int64_t count = element_count(shape, static_cast<int64_t>(sizeof(T)), "write_npy");
  if (count > 0 && data == nullptr) fail("write_npy: data is null for shape ", shape_text(shape));

  std::string header = std::string("{'descr': '") + (sizeof(T) == 4 ? "<f4" : "<f8") +
                       "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // Preamble (10 bytes) + header + '\n' is padded with spaces to a multiple of 64 bytes.
  const std::size_t unpadded = kMagicBytes + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535)
    fail("write_npy: header of ", header.size(), " bytes needs format 2.0");

  const unsigned char preamble[10] = {0x93,
                                      'N',
                                      'U',
                                      'M',
                                      'P',
                                      'Y',
                                      1,
                                      0,
                                      static_cast<unsigned char>(header.size() & 0xff),
                                      static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(preamble), sizeof(preamble));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<unsigned char> chunk(kChunkElements * sizeof(T));
  for (int64_t first = 0; first < count && out;) {
    const int64_t n = std::min(count - first, static_cast<int64_t>(kChunkElements));
    for (int64_t i = 0; i < n; ++i)
      encode(data[first + i], chunk.data() + i * static_cast<int64_t>(sizeof(T)));
    out.write(reinterpret_cast<const char*>(chunk.data()),
              static_cast<std::streamsize>(n * static_cast<int64_t>(sizeof(T))));
    first += n;
  }
  if (!out) fail("write_npy: write failed (stream error)");
}

template <typename T>
void write_npy(const std::string& path, const T* data, const std::vector<int64_t>& shape) {
  element_count(shape, static_cast<int64_t>(sizeof(T)), path);  // reject before creating a file
  detail::write_file_atomically(path, [&](std::ostream& out) { write_npy(out, data, shape); });
}

template NpyArrayT<float> read_npy<float>(std::istream&, const std::string&, const NpyReadLimits&);
template NpyArrayT<double> read_npy<double>(std::istream&, const std::string&,
                                            const NpyReadLimits&);
template NpyArrayT<float> read_npy<float>(const std::string&, const NpyReadLimits&);
template NpyArrayT<double> read_npy<double>(const std::string&, const NpyReadLimits&);
template void write_npy<float>(std::ostream&, const float*, const std::vector<int64_t>&);
template void write_npy<double>(std::ostream&, const double*, const std::vector<int64_t>&);
template void write_npy<float>(const std::string&, const float*, const std::vector<int64_t>&);
template void write_npy<double>(const std::string&, const double*, const std::vector<int64_t>&);

}  // namespace sparse_formats
