// Matrix Market reading: banner, size line, entries; COO -> CSR done here (sort by (row, col))
// so this file depends on no other conversion code. read_mask_mtx / read_csr_mtx are in
// matrix_market_csr.cpp, the writers in matrix_market_write.cpp.
#include <sparse_formats/matrix_market.hpp>

#include <sparse_formats/error.hpp>

#include "format_internal.hpp"
#include "matrix_market_lines.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <istream>
#include <limits>
#include <string_view>
#include <system_error>

namespace sparse_formats {
namespace {

using namespace mtx_detail;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
// Storage reserved up front from a declared count; beyond it, vectors grow with the data read.
constexpr int64_t kReserveCap = int64_t{1} << 16;

// a * b > limit, for a, b, limit >= 0, without overflow.
bool product_exceeds(int64_t a, int64_t b, int64_t limit) {
  if (a == 0 || b == 0) return false;
  return a > limit / b;
}

enum class Field { real, integer, pattern };

struct Banner {
  bool coordinate = true;
  Field field = Field::real;
  bool symmetric = false;
};

Banner read_banner(LineReader& lines) {
  if (!lines.next_line()) lines.error("empty input: expected a '%%MatrixMarket' banner");
  const auto& tokens = lines.tokens();
  if (tokens.empty() || tokens[0] != "%%MatrixMarket") {
    lines.error("missing banner: the first line must start with '%%MatrixMarket', found '",
                lines.line().substr(0, 60), "'");
  }
  if (tokens.size() != 5) {
    lines.error("bad banner: expected '%%MatrixMarket matrix <format> <field> <symmetry>' ",
                "(5 words), found ", tokens.size(), " words");
  }
  const std::string object = lowercase(tokens[1]);
  const std::string format = lowercase(tokens[2]);
  const std::string field = lowercase(tokens[3]);
  const std::string symmetry = lowercase(tokens[4]);
  if (object != "matrix") lines.error("unsupported object '", tokens[1], "' (only 'matrix')");
  Banner banner;
  if (format == "array") {
    banner.coordinate = false;
  } else if (format != "coordinate") {
    lines.error("unsupported format '", tokens[2], "' (only 'coordinate' or 'array')");
  }
  if (field == "real" || field == "double") {
    banner.field = Field::real;
  } else if (field == "integer") {
    banner.field = Field::integer;
  } else if (field == "pattern" && banner.coordinate) {
    banner.field = Field::pattern;
  } else {
    lines.error("unsupported field '", tokens[3], "' for ", format, " files (supported: real, ",
                "integer", banner.coordinate ? ", pattern)" : ")");
  }
  if (symmetry == "symmetric" && banner.coordinate) {
    banner.symmetric = true;
  } else if (symmetry != "general") {
    lines.error("unsupported symmetry '", tokens[4], "' for ", format, " files (supported: general",
                banner.coordinate ? ", symmetric)" : ")");
  }
  return banner;
}

struct Entry {
  int64_t row;  // 0-based
  int64_t col;
  double value;
  int64_t line;  // where the entry was read; orders entries in file order
};

void sort_entries(std::vector<Entry>& entries) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.row != b.row) return a.row < b.row;
    if (a.col != b.col) return a.col < b.col;
    return a.line < b.line;
  });
}

// Adds the duplicate `next` into `merged`. Each value read is finite (and, in an integer field, an
// exact integer within +-2^53), but their sum need not be: 1e308 + 1e308 is Inf, 2^53 + 1 has no
// double. Such a sum is refused like a value read as it would be, naming both lines.
void add_duplicate(Entry& merged, const Entry& next, int64_t first_line, int64_t count, Field field,
                   const std::string& source) {
  std::string refused;
  if (field == Field::integer) {
    // Both addends lie within +-2^53, so they are exact as int64 and their sum cannot overflow.
    const int64_t sum = static_cast<int64_t>(merged.value) + static_cast<int64_t>(next.value);
    merged.value = static_cast<double>(sum);
    if (sum > kMaxExactInteger || sum < -kMaxExactInteger) {
      refused = detail::concat(sum, ", beyond +-2^53 where an integer field has no exact double");
    }
  } else {
    merged.value += next.value;
    if (!std::isfinite(merged.value)) {
      refused = detail::concat(merged.value, ", which is not finite (duplicates are summed; NaN / ",
                               "Inf are not allowed)");
    }
  }
  if (refused.empty()) return;
  fail(source, ":", next.line, ": duplicate entries (", merged.row + 1, ", ", merged.col + 1,
       ") at lines ", first_line, " and ", next.line,
       count > 2 ? detail::concat(" (", count, " entries)") : std::string(), " sum to ", refused);
}

// Sorted entries -> one entry per (row, col), following the policy.
void merge_duplicates(std::vector<Entry>& entries, DuplicatePolicy duplicates, Field field,
                      const std::string& source) {
  std::size_t kept = 0;
  int64_t first_line = 0;  // where the kept entry's (row, col) first appeared
  int64_t count = 1;       // how many entries the kept one merges
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (kept > 0 && entries[kept - 1].row == entries[i].row &&
        entries[kept - 1].col == entries[i].col) {
      Entry& first = entries[kept - 1];
      if (duplicates == DuplicatePolicy::reject) {
        fail(source, ":", entries[i].line, ": duplicate entry (", first.row + 1, ", ",
             first.col + 1, "), first given at line ", first.line);
      }
      ++count;
      if (duplicates == DuplicatePolicy::last) {
        first.value = entries[i].value;
      } else if (field != Field::pattern) {
        add_duplicate(first, entries[i], first_line, count, field, source);
      }
      first.line = entries[i].line;
      continue;
    }
    first_line = entries[i].line;
    count = 1;
    entries[kept++] = entries[i];
  }
  entries.resize(kept);
}

CsrMatrix<int64_t, double> entries_to_csr(const std::vector<Entry>& sorted, int64_t num_rows,
                                          int64_t num_cols, const std::string& source) {
  CsrMatrix<int64_t, double> csr;
  csr.pattern = internal::empty_pattern<int64_t>(source, num_rows, num_cols);
  csr.pattern.col_idx.reserve(sorted.size());
  csr.values.reserve(sorted.size());
  for (const Entry& entry : sorted) {
    ++csr.pattern.row_ptr[static_cast<std::size_t>(entry.row) + 1];
    csr.pattern.col_idx.push_back(entry.col);
    csr.values.push_back(entry.value);
  }
  for (std::size_t row = 0; row < static_cast<std::size_t>(num_rows); ++row) {
    csr.pattern.row_ptr[row + 1] += csr.pattern.row_ptr[row];
  }
  return csr;
}

void read_coordinate(LineReader& lines, const Banner& banner, MatrixMarketData& data,
                     DuplicatePolicy duplicates, const ReadLimits& limits,
                     const std::string& source) {
  const auto& size_tokens = lines.tokens();
  if (size_tokens.size() != 3) {
    lines.error("bad size line: expected '<rows> <cols> <entries>', found ", size_tokens.size(),
                " values");
  }
  data.num_rows = parse_int64(lines, size_tokens[0], "row count");
  data.num_cols = parse_int64(lines, size_tokens[1], "column count");
  const int64_t declared = parse_int64(lines, size_tokens[2], "entry count");
  if (data.num_rows < 0 || data.num_cols < 0 || declared < 0) {
    lines.error("bad size line: negative size (rows ", data.num_rows, ", cols ", data.num_cols,
                ", entries ", declared, ")");
  }
  check_expected_shape(lines, data.num_rows, data.num_cols, limits);
  const int64_t size_line = lines.line_number();
  if (banner.symmetric) {
    if (data.num_rows != data.num_cols) {
      lines.error("symmetric matrix must be square, found ", data.num_rows, " x ", data.num_cols);
    }
    // At most the lower triangle with the diagonal: n (n + 1) / 2 entries.
    const int64_t n = data.num_rows;
    const bool exceeds = n % 2 == 0 ? product_exceeds(n / 2, n + 1, declared - 1)
                                    : product_exceeds(n, (n + 1) / 2, declared - 1);
    if (declared > 0 && !exceeds) {
      lines.error("entry count ", declared, " exceeds the ", n, " x ", n,
                  " lower triangle with diagonal of a symmetric matrix");
    }
  } else if (declared > 0 && !product_exceeds(data.num_rows, data.num_cols, declared - 1)) {
    lines.error("entry count ", declared, " exceeds rows * cols = ", data.num_rows, " * ",
                data.num_cols);
  }

  const bool has_value = banner.field != Field::pattern;
  const std::size_t tokens_per_entry = has_value ? 3 : 2;
  std::vector<Entry> entries;
  entries.reserve(static_cast<std::size_t>(std::min(declared, kReserveCap)));
  for (int64_t k = 1; k <= declared; ++k) {
    if (!lines.next_content_line()) {
      lines.error("expected ", declared, " entries, found ", k - 1, " (file ends early)");
    }
    const auto& tokens = lines.tokens();
    if (tokens.size() != tokens_per_entry) {
      lines.error("entry ", k, ": expected ", tokens_per_entry,
                  has_value ? " values (row col value)" : " values (row col)", ", found ",
                  tokens.size());
    }
    const int64_t row = parse_int64(lines, tokens[0], "row index");
    const int64_t col = parse_int64(lines, tokens[1], "column index");
    if (row < 1 || row > data.num_rows) {
      lines.error("entry ", k, ": row index ", row, " is out of range [1, ", data.num_rows,
                  "] (indices are 1-based)");
    }
    if (col < 1 || col > data.num_cols) {
      lines.error("entry ", k, ": column index ", col, " is out of range [1, ", data.num_cols,
                  "] (indices are 1-based)");
    }
    if (banner.symmetric && row < col) {
      lines.error("entry ", k, ": (", row, ", ", col, ") lies above the diagonal; a symmetric ",
                  "file stores only the lower triangle (row >= col)");
    }
    const double value =
        has_value ? parse_value(lines, tokens[2], banner.field == Field::integer, k) : 1.0;
    entries.push_back({row - 1, col - 1, value, lines.line_number()});
  }
  if (lines.next_content_line()) {
    lines.error("too many entries: the size line declares ", declared, ", found more");
  }
  // Nothing so far was sized by the declared shape (entries are stored as read); the CSR row
  // offsets will be. The limit is checked here rather than on the size line so that errors in
  // the entries, which say more about a malformed file, keep coming first.
  check_row_limit(source, size_line, data.num_rows, limits);

  sort_entries(entries);
  merge_duplicates(entries, duplicates, banner.field, source);
  if (banner.symmetric) {
    const std::size_t stored = entries.size();
    for (std::size_t i = 0; i < stored; ++i) {
      const Entry entry = entries[i];
      if (entry.row != entry.col)
        entries.push_back({entry.col, entry.row, entry.value, entry.line});
    }
    sort_entries(entries);
  }
  data.csr = entries_to_csr(entries, data.num_rows, data.num_cols, source);
}

void read_array(LineReader& lines, const Banner& banner, MatrixMarketData& data,
                const ReadLimits& limits, const std::string& source) {
  const auto& size_tokens = lines.tokens();
  if (size_tokens.size() != 2) {
    lines.error("bad size line: expected '<rows> <cols>' for an array file, found ",
                size_tokens.size(), " values");
  }
  data.num_rows = parse_int64(lines, size_tokens[0], "row count");
  data.num_cols = parse_int64(lines, size_tokens[1], "column count");
  if (data.num_rows < 0 || data.num_cols < 0) {
    lines.error("bad size line: negative size (rows ", data.num_rows, ", cols ", data.num_cols,
                ")");
  }
  check_expected_shape(lines, data.num_rows, data.num_cols, limits);
  const int64_t size_line = lines.line_number();
  if (product_exceeds(data.num_rows, data.num_cols, kInt64Max)) {
    lines.error("rows * cols = ", data.num_rows, " * ", data.num_cols, " overflows int64");
  }
  const int64_t count = data.num_rows * data.num_cols;
  std::vector<double> column_major;
  column_major.reserve(static_cast<std::size_t>(std::min(count, kReserveCap)));
  for (int64_t k = 1; k <= count; ++k) {
    if (!lines.next_content_line()) {
      lines.error("expected ", count, " entries, found ", k - 1, " (file ends early)");
    }
    if (lines.tokens().size() != 1) {
      lines.error("entry ", k, ": expected 1 value per line in an array file, found ",
                  lines.tokens().size());
    }
    column_major.push_back(
        parse_value(lines, lines.tokens()[0], banner.field == Field::integer, k));
  }
  if (lines.next_content_line()) {
    lines.error("too many entries: the size line declares ", count, ", found more");
  }
  // The values are all here; the CSR of read_mask_mtx / read_csr_mtx has num_rows + 1 offsets.
  check_row_limit(source, size_line, data.num_rows, limits);
  // One step per value read, not per declared column: with no rows (or no columns) the other
  // extent may be anything up to INT64_MAX and there is nothing to move.
  data.dense.resize(column_major.size());
  const auto rows = static_cast<std::size_t>(data.num_rows);
  const auto cols = static_cast<std::size_t>(data.num_cols);
  for (std::size_t k = 0; k < column_major.size(); ++k) {
    data.dense[(k % rows) * cols + k / rows] = column_major[k];
  }
}

}  // namespace

MatrixMarketData read_matrix_market(std::istream& in, const std::string& source_name,
                                    DuplicatePolicy duplicates, const ReadLimits& limits) {
  check_limits(source_name, limits);
  LineReader lines(in, source_name);
  const Banner banner = read_banner(lines);
  if (!lines.next_content_line()) lines.error("missing size line (file ends after the banner)");
  MatrixMarketData data;
  data.is_pattern = banner.field == Field::pattern;
  data.is_dense = !banner.coordinate;
  data.is_symmetric = banner.symmetric;
  if (banner.coordinate) {
    read_coordinate(lines, banner, data, duplicates, limits, source_name);
  } else {
    read_array(lines, banner, data, limits, source_name);
  }
  return data;
}

MatrixMarketData read_matrix_market_file(const std::string& path, DuplicatePolicy duplicates,
                                         const ReadLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open for reading");
  return read_matrix_market(in, path, duplicates, limits);
}

}  // namespace sparse_formats
