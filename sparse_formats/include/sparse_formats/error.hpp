// Errors raised by sparse_formats. Every message names the argument or field, the position
// and the offending values, e.g. "csr: row_ptr[3] = 7 < row_ptr[2] = 9 (row_ptr must not decrease)".
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sparse_formats {

// Bad input: a malformed matrix, file, argument or pattern spec. Nothing was written.
class FormatError : public std::invalid_argument {
 public:
  explicit FormatError(const std::string& message) : std::invalid_argument(message) {}
};

namespace detail {
template <typename... Parts>
std::string concat(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  return out.str();
}
}  // namespace detail

// Throws FormatError with the parts streamed together: fail("csr: row_ptr[", i, "] = ", v).
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  throw FormatError(detail::concat(std::forward<Parts>(parts)...));
}

}  // namespace sparse_formats
