// Compressed sparse row matrices: the structure (a pattern) and, optionally, values.
//
// A mask of attention scores is a pattern (no values); a sparse Q, K or V is a matrix (pattern +
// one value per stored entry). Owning containers hold std::vectors; views hold pointers and are
// what algorithms take. Index is int32_t or int64_t; both are instantiated in the library.
//
// Invariants (checked by validate(), assumed everywhere else):
//   row_ptr has num_rows + 1 entries, row_ptr[0] == 0, row_ptr never decreases,
//   row_ptr[num_rows] == nnz == col_idx.size(), columns within a row strictly increase and lie in
//   [0, num_cols), values (if any) has nnz entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sparse_formats {

template <typename Index>
struct CsrPatternView {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  const Index* row_ptr = nullptr;  // (num_rows + 1)
  const Index* col_idx = nullptr;  // (nnz)

  int64_t nnz() const { return row_ptr ? static_cast<int64_t>(row_ptr[num_rows]) : 0; }
  int64_t row_begin(int64_t row) const { return static_cast<int64_t>(row_ptr[row]); }
  int64_t row_end(int64_t row) const { return static_cast<int64_t>(row_ptr[row + 1]); }
  int64_t row_length(int64_t row) const { return row_end(row) - row_begin(row); }
};

template <typename Index>
struct CsrPattern {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  std::vector<Index> row_ptr;  // (num_rows + 1)
  std::vector<Index> col_idx;  // (nnz)

  CsrPattern() : row_ptr(1, Index{0}) {}
  CsrPattern(int64_t rows, int64_t cols, std::vector<Index> ptr, std::vector<Index> idx)
      : num_rows(rows), num_cols(cols), row_ptr(std::move(ptr)), col_idx(std::move(idx)) {}

  // An all-empty rows x cols pattern.
  static CsrPattern empty(int64_t rows, int64_t cols) {
    return CsrPattern(rows, cols, std::vector<Index>(static_cast<std::size_t>(rows) + 1, Index{0}), {});
  }

  int64_t nnz() const { return static_cast<int64_t>(col_idx.size()); }
  CsrPatternView<Index> view() const { return {num_rows, num_cols, row_ptr.data(), col_idx.data()}; }
};

template <typename Index, typename Value>
struct CsrMatrixView {
  CsrPatternView<Index> pattern;
  const Value* values = nullptr;  // (nnz), aligned with pattern.col_idx

  int64_t num_rows() const { return pattern.num_rows; }
  int64_t num_cols() const { return pattern.num_cols; }
  int64_t nnz() const { return pattern.nnz(); }
};

template <typename Index, typename Value>
struct CsrMatrix {
  CsrPattern<Index> pattern;
  std::vector<Value> values;  // (nnz)

  int64_t num_rows() const { return pattern.num_rows; }
  int64_t num_cols() const { return pattern.num_cols; }
  int64_t nnz() const { return pattern.nnz(); }
  CsrMatrixView<Index, Value> view() const { return {pattern.view(), values.data()}; }
};

// The index type of masks produced by the pattern generators and taken by the attention API.
// 32 bits hold every mask of up to 2^31 - 1 attended pairs (n = 46340 dense); longer contexts use
// int64_t, which every function here also accepts.
using MaskIndex = int32_t;

}  // namespace sparse_formats
