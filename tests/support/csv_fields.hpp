// One CSV line's fields, for the tests that read the CLI's and the bench's CSV back: a quoted
// field (RFC 4180, as both quote a cell holding a comma or a quote) may hold commas and doubled
// quotes.
#pragma once

#include <string>
#include <vector>

namespace spattn_test {

inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      fields.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace spattn_test
