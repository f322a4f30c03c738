// Reading a Matrix Market file line by line: the lines with their numbers and the errors that name
// them, the tokens' parsers and the size line's checks against the caller's ReadLimits
// (matrix_market.cpp reads the format with these).
#pragma once

#include <sparse_formats/error.hpp>
#include <sparse_formats/read_limits.hpp>

#include <cctype>
#include <cstdint>
#include <istream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sparse_formats::mtx_detail {

// Hands out lines with their 1-based numbers, and builds "<source>:<line>: ..." errors.
class LineReader {
 public:
  LineReader(std::istream& in, const std::string& source) : in_(in), source_(source) {}

  // The next line (without its '\n' or '\r'); false at the end of the input.
  bool next_line() {
    if (!std::getline(in_, line_)) {
      if (in_.bad()) fail(source_, ":", line_number_, ": read error");
      return false;
    }
    ++line_number_;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    split();
    return true;
  }
  // The next line that is neither blank nor a '%' comment; false at the end of the input.
  bool next_content_line() {
    while (next_line()) {
      if (!tokens_.empty() && tokens_[0][0] != '%') return true;
    }
    return false;
  }

  const std::vector<std::string_view>& tokens() const { return tokens_; }
  const std::string& line() const { return line_; }
  int64_t line_number() const { return line_number_; }

  template <typename... Parts>
  [[noreturn]] void error(Parts&&... parts) const {
    fail(source_, ":", line_number_, ": ", std::forward<Parts>(parts)...);
  }

 private:
  void split() {
    tokens_.clear();
    std::size_t pos = 0;
    while (pos < line_.size()) {
      while (pos < line_.size() && std::isspace(static_cast<unsigned char>(line_[pos]))) ++pos;
      const std::size_t start = pos;
      while (pos < line_.size() && !std::isspace(static_cast<unsigned char>(line_[pos]))) ++pos;
      if (pos > start) tokens_.emplace_back(line_.data() + start, pos - start);
    }
  }

  std::istream& in_;
  const std::string& source_;
  std::string line_;
  std::vector<std::string_view> tokens_;
  int64_t line_number_ = 0;
};

std::string lowercase(std::string_view text);
// from_chars rejects a leading '+', which some writers emit ("+1.5e+00"): the token without it.
std::string_view strip_plus(std::string_view token);
// The token as an int64; errors name `what`, the token and the line.
int64_t parse_int64(const LineReader& lines, std::string_view token, const char* what);
// Every integer of magnitude up to 2^53 is exactly a double; beyond, neighbours round together.
constexpr int64_t kMaxExactInteger = int64_t{1} << 53;

// Entry `entry`'s value (an integer field's as a double): finite, or an error naming the entry;
// an integer field's value must lie within +-kMaxExactInteger.
double parse_value(const LineReader& lines, std::string_view token, bool integer_field, int64_t entry);

// The limits themselves: max_rows >= 0, expected extents >= 0 or kAnyExtent.
void check_limits(const std::string& source, const ReadLimits& limits);
// On the size line, before anything is allocated: each expected extent equals the declared one.
void check_expected_shape(const LineReader& lines, int64_t rows, int64_t cols,
                          const ReadLimits& limits);
// A row count that is not expected is at most limits.max_rows; the error names the size line
// `size_line`. Called before the first allocation sized by the row count.
void check_row_limit(const std::string& source, int64_t size_line, int64_t rows,
                     const ReadLimits& limits);

}  // namespace sparse_formats::mtx_detail
