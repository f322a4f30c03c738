// Dense <-> CSR, and changing the index width of a pattern.
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <string>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::check_shape;
using internal::to_size;

// Checks a dense argument and returns num_rows * num_cols.
template <typename Index, typename Value>
int64_t check_dense(const char* context, const Value* dense, int64_t num_rows, int64_t num_cols) {
  check_shape<Index>(context, num_rows, num_cols);
  const int64_t size = internal::checked_mul(context, "num_rows", num_rows, "num_cols", num_cols);
  if (size > 0 && dense == nullptr) {
    fail(context, ": dense is null but must hold ", num_rows, " x ", num_cols, " values");
  }
  return size;
}

// The CSR structure of the nonzeros of a dense matrix; push(flat_index) is called per nonzero in
// row-major order. Counts first so that an nnz overflowing Index throws before anything is built.
template <typename Index, typename Value, typename Push>
CsrPattern<Index> nonzero_structure(const char* context, const Value* dense, int64_t num_rows,
                                    int64_t num_cols, Push&& push) {
  const int64_t size = check_dense<Index>(context, dense, num_rows, num_cols);
  int64_t nnz = 0;
  for (int64_t i = 0; i < size; ++i) nnz += dense[i] != Value{0} ? 1 : 0;
  internal::check_fits<Index>(context, "nnz", nnz);

  // With num_cols = 0 the dense input is empty however large num_rows is: allocate it checked.
  CsrPattern<Index> pattern = internal::empty_pattern<Index>(context, num_rows, num_cols);
  pattern.col_idx.reserve(to_size(nnz));
  for (int64_t r = 0; r < num_rows; ++r) {
    const Value* row = dense + r * num_cols;
    for (int64_t c = 0; c < num_cols; ++c) {
      if (row[c] == Value{0}) continue;
      pattern.col_idx.push_back(static_cast<Index>(c));
      push(r * num_cols + c);
    }
    pattern.row_ptr[to_size(r + 1)] = static_cast<Index>(pattern.col_idx.size());
  }
  return pattern;
}

// A zero num_rows x num_cols grid: sized by the shape alone (a pattern with one entry can ask for
// any), so allocated checked.
template <typename Value>
std::vector<Value> allocate_dense(const char* context, int64_t num_rows, int64_t num_cols) {
  const int64_t size = internal::checked_mul(context, "num_rows", num_rows, "num_cols", num_cols);
  const auto what = [&] {
    return detail::concat("dense (num_rows * num_cols = ", num_rows, " * ", num_cols, ")");
  };
  return internal::allocate<Value>(context, what, size, Value{0});
}

}  // namespace

template <typename Index, typename Value>
CsrMatrix<Index, Value> dense_to_csr(const Value* dense, int64_t num_rows, int64_t num_cols) {
  CsrMatrix<Index, Value> csr;
  csr.pattern = nonzero_structure<Index>("dense_to_csr", dense, num_rows, num_cols,
                                         [&](int64_t flat) { csr.values.push_back(dense[flat]); });
  return csr;
}

template <typename Index, typename Value>
CsrPattern<Index> dense_to_csr_pattern(const Value* dense, int64_t num_rows, int64_t num_cols) {
  return nonzero_structure<Index>("dense_to_csr_pattern", dense, num_rows, num_cols,
                                  [](int64_t) {});
}

template <typename Index, typename Value>
std::vector<Value> csr_to_dense(const CsrMatrixView<Index, Value>& csr) {
  const CsrPatternView<Index>& p = csr.pattern;
  internal::check_view("csr_to_dense", p);
  if (p.nnz() > 0 && csr.values == nullptr) fail("csr_to_dense: values is null");
  std::vector<Value> dense = allocate_dense<Value>("csr_to_dense", p.num_rows, p.num_cols);
  for (int64_t r = 0; r < p.num_rows; ++r) {
    for (int64_t k = p.row_begin(r); k < p.row_end(r); ++k) {
      dense[to_size(r * p.num_cols + p.col_idx[k])] = csr.values[k];
    }
  }
  return dense;
}

template <typename Index>
std::vector<uint8_t> csr_pattern_to_dense(const CsrPatternView<Index>& pattern) {
  internal::check_view("csr_pattern_to_dense", pattern);
  std::vector<uint8_t> dense =
      allocate_dense<uint8_t>("csr_pattern_to_dense", pattern.num_rows, pattern.num_cols);
  for (int64_t r = 0; r < pattern.num_rows; ++r) {
    for (int64_t k = pattern.row_begin(r); k < pattern.row_end(r); ++k) {
      dense[to_size(r * pattern.num_cols + pattern.col_idx[k])] = 1;
    }
  }
  return dense;
}

template <typename To, typename From>
CsrPattern<To> convert_index(const CsrPatternView<From>& pattern) {
  const char* context = "convert_index";
  check_shape<To>(context, pattern.num_rows, pattern.num_cols);
  internal::check_view(context, pattern);
  const int64_t nnz = pattern.nnz();
  internal::check_fits<To>(context, "nnz", nnz);
  std::vector<To> row_ptr(to_size(pattern.num_rows) + 1);
  for (int64_t r = 0; r <= pattern.num_rows; ++r) {
    row_ptr[to_size(r)] = static_cast<To>(pattern.row_ptr[r]);
  }
  std::vector<To> col_idx(to_size(nnz));
  for (int64_t k = 0; k < nnz; ++k) col_idx[to_size(k)] = static_cast<To>(pattern.col_idx[k]);
  return CsrPattern<To>(pattern.num_rows, pattern.num_cols, std::move(row_ptr), std::move(col_idx));
}

template CsrMatrix<int32_t, float> dense_to_csr<int32_t, float>(const float*, int64_t, int64_t);
template CsrMatrix<int32_t, double> dense_to_csr<int32_t, double>(const double*, int64_t, int64_t);
template CsrMatrix<int64_t, float> dense_to_csr<int64_t, float>(const float*, int64_t, int64_t);
template CsrMatrix<int64_t, double> dense_to_csr<int64_t, double>(const double*, int64_t, int64_t);

// Masks also come as bytes (csr_pattern_to_dense returns them), so uint8_t is instantiated too.
template CsrPattern<int32_t> dense_to_csr_pattern<int32_t, float>(const float*, int64_t, int64_t);
template CsrPattern<int32_t> dense_to_csr_pattern<int32_t, double>(const double*, int64_t, int64_t);
template CsrPattern<int32_t> dense_to_csr_pattern<int32_t, uint8_t>(const uint8_t*, int64_t,
                                                                    int64_t);
template CsrPattern<int64_t> dense_to_csr_pattern<int64_t, float>(const float*, int64_t, int64_t);
template CsrPattern<int64_t> dense_to_csr_pattern<int64_t, double>(const double*, int64_t, int64_t);
template CsrPattern<int64_t> dense_to_csr_pattern<int64_t, uint8_t>(const uint8_t*, int64_t,
                                                                    int64_t);

template std::vector<float> csr_to_dense<int32_t, float>(const CsrMatrixView<int32_t, float>&);
template std::vector<double> csr_to_dense<int32_t, double>(const CsrMatrixView<int32_t, double>&);
template std::vector<float> csr_to_dense<int64_t, float>(const CsrMatrixView<int64_t, float>&);
template std::vector<double> csr_to_dense<int64_t, double>(const CsrMatrixView<int64_t, double>&);

template std::vector<uint8_t> csr_pattern_to_dense<int32_t>(const CsrPatternView<int32_t>&);
template std::vector<uint8_t> csr_pattern_to_dense<int64_t>(const CsrPatternView<int64_t>&);

template CsrPattern<int32_t> convert_index<int32_t, int32_t>(const CsrPatternView<int32_t>&);
template CsrPattern<int32_t> convert_index<int32_t, int64_t>(const CsrPatternView<int64_t>&);
template CsrPattern<int64_t> convert_index<int64_t, int32_t>(const CsrPatternView<int32_t>&);
template CsrPattern<int64_t> convert_index<int64_t, int64_t>(const CsrPatternView<int64_t>&);

}  // namespace sparse_formats
