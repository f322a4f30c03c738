// The limit on allocations sized by a shape (format_internal.hpp): physical memory.
#include <cstdint>
#include <limits>
#include <string>

#include "format_internal.hpp"

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

namespace sparse_formats::internal {

int64_t memory_limit_bytes() {
  static const int64_t limit = [] {
    int64_t bytes = std::numeric_limits<int64_t>::max();
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0 && pages <= bytes / page_bytes) {
      bytes = static_cast<int64_t>(pages) * page_bytes;
    }
#endif
    return bytes;
  }();
  return limit;
}

std::string bytes_text(int64_t count, int64_t item_bytes) {
  const std::string text = detail::concat(count, " x ", item_bytes, " bytes = ");
  if (count <= std::numeric_limits<int64_t>::max() / item_bytes) {
    return text + std::to_string(count * item_bytes) + " bytes";
  }
  return text + "more than 2^63 bytes";
}

}  // namespace sparse_formats::internal
