// The line reader's parsers (matrix_market_lines.hpp).
#include "matrix_market_lines.hpp"

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
    return static_cast<double>(parse_int64(lines, token, "integer value"));
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

}  // namespace sparse_formats::mtx_detail
