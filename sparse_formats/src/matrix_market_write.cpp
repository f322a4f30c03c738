// Matrix Market writing. Inputs are checked completely before the first byte is written, so a
// rejected input leaves the stream untouched; the file writers add temp-file-and-rename.
#include <sparse_formats/matrix_market.hpp>

#include <sparse_formats/error.hpp>

#include "atomic_file.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

namespace sparse_formats {
namespace {

// Batches formatted text into large writes.
class TextWriter {
 public:
  explicit TextWriter(std::ostream& out) : out_(out) { buffer_.reserve(kFlushBytes + 64); }
  ~TextWriter() = default;

  void text(const char* s) { buffer_ += s; }
  void integer(int64_t value) {
    char digits[24];
    const auto result = std::to_chars(digits, digits + sizeof(digits), value);
    buffer_.append(digits, result.ptr);
  }
  // Shortest form that reads back bit-exactly: 17 significant digits for double, 9 for float.
  template <typename Value>
  void real(Value value) {
    char digits[40];
    const int length =
        std::snprintf(digits, sizeof(digits), std::is_same_v<Value, float> ? "%.9g" : "%.17g",
                      static_cast<double>(value));
    buffer_.append(digits, static_cast<std::size_t>(length));
  }
  void end_line() {
    buffer_ += '\n';
    if (buffer_.size() >= kFlushBytes) flush();
  }
  void flush() {
    out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
    buffer_.clear();
    if (!out_) fail("matrix market: write failed (stream error)");
  }

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 16;
  std::ostream& out_;
  std::string buffer_;
};

template <typename Index>
void check_pattern(const CsrPatternView<Index>& pattern) {
  if (pattern.num_rows < 0 || pattern.num_cols < 0) {
    fail("write_matrix_market: negative shape ", pattern.num_rows, " x ", pattern.num_cols);
  }
  if (pattern.row_ptr == nullptr) {
    if (pattern.num_rows == 0) return;
    fail("write_matrix_market: row_ptr is null for ", pattern.num_rows, " rows");
  }
  if (pattern.row_ptr[0] != 0)
    fail("write_matrix_market: row_ptr[0] = ", pattern.row_ptr[0], " (must be 0)");
  if (pattern.nnz() > 0 && pattern.col_idx == nullptr) {
    fail("write_matrix_market: col_idx is null for ", pattern.nnz(), " entries");
  }
  for (int64_t row = 0; row < pattern.num_rows; ++row) {
    if (pattern.row_end(row) < pattern.row_begin(row)) {
      fail("write_matrix_market: row_ptr[", row + 1, "] = ", pattern.row_end(row), " < row_ptr[",
           row, "] = ", pattern.row_begin(row), " (row_ptr must not decrease)");
    }
    for (int64_t k = pattern.row_begin(row); k < pattern.row_end(row); ++k) {
      const auto col = static_cast<int64_t>(pattern.col_idx[k]);
      if (col < 0 || col >= pattern.num_cols) {
        fail("write_matrix_market: col_idx[", k, "] = ", col, " is out of range [0, ",
             pattern.num_cols, ") (row ", row, ")");
      }
      if (k > pattern.row_begin(row) && col <= static_cast<int64_t>(pattern.col_idx[k - 1])) {
        fail("write_matrix_market: col_idx[", k, "] = ", col, " does not exceed col_idx[", k - 1,
             "] = ", pattern.col_idx[k - 1], " (columns must strictly increase in row ", row, ")");
      }
    }
  }
}

template <typename Value>
void check_finite(const Value* values, int64_t count, const char* what) {
  if (count > 0 && values == nullptr)
    fail("write_matrix_market: ", what, " is null for ", count, " values");
  for (int64_t k = 0; k < count; ++k) {
    if (!std::isfinite(values[k])) {
      fail("write_matrix_market: ", what, "[", k, "] = ", values[k],
           " is not finite (Matrix Market files hold finite values only)");
    }
  }
}

template <typename Index>
void write_entries(TextWriter& writer, const CsrPatternView<Index>& pattern, const char* banner,
                   const std::function<void(int64_t)>& write_value) {
  writer.text(banner);
  writer.integer(pattern.num_rows);
  writer.text(" ");
  writer.integer(pattern.num_cols);
  writer.text(" ");
  writer.integer(pattern.nnz());
  writer.end_line();
  for (int64_t row = 0; row < pattern.num_rows; ++row) {
    for (int64_t k = pattern.row_begin(row); k < pattern.row_end(row); ++k) {
      writer.integer(row + 1);
      writer.text(" ");
      writer.integer(static_cast<int64_t>(pattern.col_idx[k]) + 1);
      if (write_value) write_value(k);
      writer.end_line();
    }
  }
  writer.flush();
}

}  // namespace

template <typename Index>
void write_matrix_market(std::ostream& out, const CsrPatternView<Index>& pattern) {
  check_pattern(pattern);
  TextWriter writer(out);
  write_entries(writer, pattern, "%%MatrixMarket matrix coordinate pattern general\n", nullptr);
}

template <typename Index, typename Value>
void write_matrix_market(std::ostream& out, const CsrMatrixView<Index, Value>& csr) {
  check_pattern(csr.pattern);
  check_finite(csr.values, csr.nnz(), "values");
  TextWriter writer(out);
  write_entries(writer, csr.pattern, "%%MatrixMarket matrix coordinate real general\n",
                [&](int64_t k) {
                  writer.text(" ");
                  writer.real(csr.values[k]);
                });
}

template <typename Value>
void write_matrix_market_dense(std::ostream& out, const Value* dense, int64_t num_rows,
                               int64_t num_cols) {
  if (num_rows < 0 || num_cols < 0) {
    fail("write_matrix_market_dense: negative shape ", num_rows, " x ", num_cols);
  }
  if (num_cols > 0 && num_rows > std::numeric_limits<int64_t>::max() / num_cols) {
    fail("write_matrix_market_dense: rows * cols = ", num_rows, " * ", num_cols,
         " overflows int64");
  }
  check_finite(dense, num_rows * num_cols, "dense");
  TextWriter writer(out);
  writer.text("%%MatrixMarket matrix array real general\n");
  writer.integer(num_rows);
  writer.text(" ");
  writer.integer(num_cols);
  writer.end_line();
  // The array format lists values column by column.
  for (int64_t col = 0; col < num_cols; ++col) {
    for (int64_t row = 0; row < num_rows; ++row) {
      writer.real(dense[row * num_cols + col]);
      writer.end_line();
    }
  }
  writer.flush();
}

template <typename Index>
void write_matrix_market_file(const std::string& path, const CsrPatternView<Index>& pattern) {
  check_pattern(pattern);  // before creating any file
  detail::write_file_atomically(path,
                                [&](std::ostream& out) { write_matrix_market(out, pattern); });
}

template <typename Index, typename Value>
void write_matrix_market_file(const std::string& path, const CsrMatrixView<Index, Value>& csr) {
  detail::write_file_atomically(path, [&](std::ostream& out) { write_matrix_market(out, csr); });
}

template <typename Value>
void write_matrix_market_dense_file(const std::string& path, const Value* dense, int64_t num_rows,
                                    int64_t num_cols) {
  detail::write_file_atomically(
      path, [&](std::ostream& out) { write_matrix_market_dense(out, dense, num_rows, num_cols); });
}

#define SPARSE_FORMATS_INSTANTIATE_INDEX(Index)                                          \
  template void write_matrix_market<Index>(std::ostream&, const CsrPatternView<Index>&); \
  template void write_matrix_market_file<Index>(const std::string&, const CsrPatternView<Index>&);
#define SPARSE_FORMATS_INSTANTIATE_MATRIX(Index, Value)                                \
  template void write_matrix_market<Index, Value>(std::ostream&,                       \
                                                  const CsrMatrixView<Index, Value>&); \
  template void write_matrix_market_file<Index, Value>(const std::string&,             \
                                                       const CsrMatrixView<Index, Value>&);
#define SPARSE_FORMATS_INSTANTIATE_DENSE(Value)                                                  \
  template void write_matrix_market_dense<Value>(std::ostream&, const Value*, int64_t, int64_t); \
  template void write_matrix_market_dense_file<Value>(const std::string&, const Value*, int64_t, \
                                                      int64_t);

SPARSE_FORMATS_INSTANTIATE_INDEX(int32_t)
SPARSE_FORMATS_INSTANTIATE_INDEX(int64_t)
SPARSE_FORMATS_INSTANTIATE_MATRIX(int32_t, float)
SPARSE_FORMATS_INSTANTIATE_MATRIX(int32_t, double)
SPARSE_FORMATS_INSTANTIATE_MATRIX(int64_t, float)
SPARSE_FORMATS_INSTANTIATE_MATRIX(int64_t, double)
SPARSE_FORMATS_INSTANTIATE_DENSE(float)
SPARSE_FORMATS_INSTANTIATE_DENSE(double)

#undef SPARSE_FORMATS_INSTANTIATE_INDEX
#undef SPARSE_FORMATS_INSTANTIATE_MATRIX
#undef SPARSE_FORMATS_INSTANTIATE_DENSE

}  // namespace sparse_formats
