// The checks of a CSR input (a sparse Q, K or V) at a public boundary, shared by the reference and
// the sparse-input attention API. Private to src/.
#pragma once

#include <spattn/error.hpp>

#include <sparse_formats/csr.hpp>
#include <sparse_formats/validate.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace spattn::detail {

// Shape rows x cols (`shape_name` says what they are, "seqlen_q x head_dim"), a valid structure
// (sparse_formats::validate: row_ptr from 0, never decreasing, ending at nnz; columns in range,
// strictly increasing per row) and finite values. Throws InvalidArgument starting with
// "`where`: `name`" ("attention_forward: q: col_idx[12] = 40 is out of range [0, 32) (row 3)").
// A view cannot know its arrays' lengths: they are taken to be what the view says.
template <typename Index, typename Value>
void check_csr_input(const char* where, const std::string& name,
                     const sparse_formats::CsrMatrixView<Index, Value>& csr, int64_t rows,
                     int64_t cols, const char* shape_name) {
  if (csr.num_rows() != rows || csr.num_cols() != cols) {
    fail(where, ": ", name, " is ", csr.num_rows(), " x ", csr.num_cols(), ", expected ", shape_name,
         " = ", rows, " x ", cols);
  }
  if (rows > 0 && csr.pattern.row_ptr == nullptr) fail(where, ": ", name, ".row_ptr is null (", rows, " rows)");
  const int64_t nnz = csr.nnz();
  sparse_formats::validate(csr.pattern, rows + 1, nnz, std::string(where) + ": " + name);
  if (nnz > 0 && csr.values == nullptr) fail(where, ": ", name, ".values is null but nnz = ", nnz);
  for (int64_t p = 0; p < nnz; ++p) {
    if (!std::isfinite(static_cast<double>(csr.values[p]))) {
      fail(where, ": ", name, ".values[", p, "] = ", csr.values[p], " is not finite");
    }
  }
}

}  // namespace spattn::detail
