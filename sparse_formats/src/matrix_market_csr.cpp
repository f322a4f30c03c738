// read_mask_mtx / read_csr_mtx: a Matrix Market file as a CSR of the requested index type (array
// files by their nonzeros). The parsing is read_matrix_market's (matrix_market.cpp).
#include <sparse_formats/error.hpp>
#include <sparse_formats/matrix_market.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

template <typename Index>
void check_index_fits(const MatrixMarketData& data, int64_t nnz, const std::string& path) {
  const auto limit = static_cast<int64_t>(std::numeric_limits<Index>::max());
  if (data.num_rows > limit || data.num_cols > limit || nnz > limit) {
    fail(path, ": ", data.num_rows, " x ", data.num_cols, " matrix with ", nnz,
         " entries does not fit a ", sizeof(Index) * 8, "-bit index type");
  }
}

// The nonzeros of a dense row-major matrix, as CSR. The row offsets are sized by num_rows, which
// the reader's limits have bounded (a file may hold no values at all when num_cols is 0).
template <typename Index>
CsrMatrix<Index, double> dense_nonzeros(const MatrixMarketData& data, const std::string& path) {
  const auto nnz = static_cast<int64_t>(
      std::count_if(data.dense.begin(), data.dense.end(), [](double v) { return v != 0.0; }));
  check_index_fits<Index>(data, nnz, path);
  CsrMatrix<Index, double> csr;
  csr.pattern = internal::empty_pattern<Index>(path, data.num_rows, data.num_cols);
  csr.pattern.col_idx.reserve(static_cast<std::size_t>(nnz));
  csr.values.reserve(static_cast<std::size_t>(nnz));
  for (int64_t row = 0; row < data.num_rows; ++row) {
    for (int64_t col = 0; col < data.num_cols; ++col) {
      const double value = data.dense[static_cast<std::size_t>(row * data.num_cols + col)];
      if (value == 0.0) continue;
      csr.pattern.col_idx.push_back(static_cast<Index>(col));
      csr.values.push_back(value);
    }
    csr.pattern.row_ptr[static_cast<std::size_t>(row) + 1] =
        static_cast<Index>(csr.pattern.col_idx.size());
  }
  return csr;
}

template <typename Index>
CsrMatrix<Index, double> read_as_csr(const std::string& path, const ReadLimits& limits) {
  MatrixMarketData data = read_matrix_market_file(path, DuplicatePolicy::sum, limits);
  if (data.is_dense) return dense_nonzeros<Index>(data, path);
  check_index_fits<Index>(data, data.csr.nnz(), path);
  if constexpr (std::is_same_v<Index, int64_t>) {
    return std::move(data.csr);
  } else {
    const auto& source = data.csr.pattern;
    CsrMatrix<Index, double> csr;
    csr.pattern = CsrPattern<Index>(source.num_rows, source.num_cols,
                                    std::vector<Index>(source.row_ptr.size()),
                                    std::vector<Index>(source.col_idx.size()));
    std::transform(source.row_ptr.begin(), source.row_ptr.end(), csr.pattern.row_ptr.begin(),
                   [](int64_t v) { return static_cast<Index>(v); });
    std::transform(source.col_idx.begin(), source.col_idx.end(), csr.pattern.col_idx.begin(),
                   [](int64_t v) { return static_cast<Index>(v); });
    csr.values = std::move(data.csr.values);
    return csr;
  }
}

}  // namespace

template <typename Index>
CsrPattern<Index> read_mask_mtx(const std::string& path, const ReadLimits& limits) {
  return read_as_csr<Index>(path, limits).pattern;
}

template <typename Index>
CsrMatrix<Index, double> read_csr_mtx(const std::string& path, const ReadLimits& limits) {
  return read_as_csr<Index>(path, limits);
}

template CsrPattern<int32_t> read_mask_mtx<int32_t>(const std::string&, const ReadLimits&);
template CsrPattern<int64_t> read_mask_mtx<int64_t>(const std::string&, const ReadLimits&);
template CsrMatrix<int32_t, double> read_csr_mtx<int32_t>(const std::string&, const ReadLimits&);
template CsrMatrix<int64_t, double> read_csr_mtx<int64_t>(const std::string&, const ReadLimits&);

}  // namespace sparse_formats
