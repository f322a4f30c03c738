// The line reader's parsers (matrix_market_lines.hpp).
#include "matrix_market_lines.hpp"

#include "format_internal.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

namespace sparse_formats::mtx_detail {

std::string lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view strip_plus(std::string_view token) {
  if (token.size() > 1 && token[0] == '+' && token[1] != '-' && token[1] != '+') {
    token.remove_prefix(1);
  }
  return token;
}

int64_t parse_int64(const LineReader& lines, std::string_view token, const char* what) {
  const std::string_view digits = strip_plus(token);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc::result_out_of_range) {
    lines.error(what, " '", token, "' does not fit in a 64-bit integer");
  }
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    lines.error(what, " '", token, "' is not an integer");
  }
  return value;
}

double parse_value(const LineReader& lines, std::string_view token, bool integer_field,
                   int64_t entry) {
  if (integer_field) {
    const int64_t value = parse_int64(lines, token, "integer value");
    if (value > kMaxExactInteger || value < -kMaxExactInteger) {
      lines.error("entry ", entry, ": integer value ", value, " lies beyond +-2^53 = +-",
                  kMaxExactInteger, " and has no exact double");
    }
    return static_cast<double>(value);
  }
  const std::string_view number = strip_plus(token);
  double value = 0.0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec == std::errc::result_out_of_range) {
    lines.error("entry ", entry, ": value '", token, "' is out of the range of double");
  }
  if (ec != std::errc() || end != number.data() + number.size()) {
    lines.error("entry ", entry, ": value '", token, "' is not a number");
  }
  if (!std::isfinite(value)) {
    lines.error("entry ", entry, ": value '", token, "' is not finite (NaN / Inf are not allowed)");
  }
  return value;
}

void check_limits(const std::string& source, const ReadLimits& limits) {
  if (limits.max_rows < 0) {
    fail(source, ": ReadLimits::max_rows = ", limits.max_rows, " must be >= 0");
  }
  if (limits.expected_rows < kAnyExtent || limits.expected_cols < kAnyExtent) {
    fail(source, ": ReadLimits::expected_rows = ", limits.expected_rows,
         ", expected_cols = ", limits.expected_cols, " must be >= 0 or kAnyExtent (-1)");
  }
}

void check_expected_shape(const LineReader& lines, int64_t rows, int64_t cols,
                          const ReadLimits& limits) {
  if (limits.expected_rows != kAnyExtent && rows != limits.expected_rows) {
    lines.error("row count ", rows, " does not match the expected ", limits.expected_rows,
                " (ReadLimits::expected_rows)");
  }
  if (limits.expected_cols != kAnyExtent && cols != limits.expected_cols) {
    lines.error("column count ", cols, " does not match the expected ", limits.expected_cols,
                " (ReadLimits::expected_cols)");
  }
}

void check_row_limit(const std::string& source, int64_t size_line, int64_t rows,
                     const ReadLimits& limits) {
  if (limits.expected_rows != kAnyExtent || rows <= limits.max_rows) return;
  // What the rows would cost however few entries there are: the CSR's int64 row offsets.
  fail(source, ":", size_line, ": row count ", rows, " exceeds the limit of ", limits.max_rows,
       " rows (ReadLimits::max_rows; the row offsets alone would take ",
       internal::bytes_text(rows, 8), "); pass the expected shape or raise max_rows to read it");
}

}  // namespace sparse_formats::mtx_detail
