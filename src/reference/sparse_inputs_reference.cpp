// The fp64 reference on CSR inputs (reference.hpp, "Sparse inputs"): each head's matrix checked,
// densified (absent entries are zero), and handed to the dense reference.
#include <spattn/reference.hpp>

#include "reference/csr_input_check.hpp"

#include <spattn/error.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace spattn::reference {
namespace {

// A (batch, heads, seqlen, head_dim) contiguous double tensor.
struct Dense {
  std::vector<double> data;
  TensorView<const double> view;
};

// Every matrix must have the first one's shape.
template <typename Index>
Dense densify(const char* where, const char* name, const CsrTensor<Index>& tensor) {
  if (tensor.batch < 0 || tensor.heads < 0) {
    fail(where, ": ", name, " has batch ", tensor.batch, " and heads ", tensor.heads, " (must be >= 0)");
  }
  const auto count = static_cast<size_t>(tensor.batch * tensor.heads);
  if (tensor.matrices.size() != count) {
    fail(where, ": ", name, " has ", tensor.matrices.size(), " matrices, expected batch * heads = ", count);
  }
  const int64_t rows = count > 0 ? tensor.matrices[0].num_rows() : 0;
  const int64_t cols = count > 0 ? tensor.matrices[0].num_cols() : 0;
  Dense dense;
  dense.data.assign(count * static_cast<size_t>(rows * cols), 0.0);
  for (size_t m = 0; m < count; ++m) {
    const auto& csr = tensor.matrices[m];
    const std::string matrix_name = std::string(name) + "[" + std::to_string(m) + "]";
    detail::check_csr_input(where, matrix_name, csr, rows, cols, "the shape of the first matrix");
    double* out = dense.data.data() + m * static_cast<size_t>(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = csr.pattern.row_begin(r); p < csr.pattern.row_end(r); ++p) {
        out[r * cols + static_cast<int64_t>(csr.pattern.col_idx[p])] = csr.values[p];
      }
    }
  }
  dense.view = TensorView<const double>::contiguous(dense.data.data(), tensor.batch, tensor.heads, rows, cols);
  return dense;
}

}  // namespace

template <typename Index>
ForwardResult forward(const CsrTensor<Index>& q, const CsrTensor<Index>& k,
                      const CsrTensor<Index>& v, const MaskList<Index>& masks, double scale) {
  const char* where = "reference::forward";
  const Dense qd = densify(where, "q", q), kd = densify(where, "k", k), vd = densify(where, "v", v);
  return forward<Index>(qd.view, kd.view, vd.view, masks, scale);
}

template <typename Index>
BackwardResult backward(const CsrTensor<Index>& q, const CsrTensor<Index>& k,
                        const CsrTensor<Index>& v, TensorView<const double> d_o,
                        const MaskList<Index>& masks, double scale) {
  const char* where = "reference::backward";
  const Dense qd = densify(where, "q", q), kd = densify(where, "k", k), vd = densify(where, "v", v);
  return backward<Index>(qd.view, kd.view, vd.view, d_o, masks, scale);
}

template ForwardResult forward<int32_t>(const CsrTensor<int32_t>&, const CsrTensor<int32_t>&,
                                        const CsrTensor<int32_t>&, const MaskList<int32_t>&, double);
template ForwardResult forward<int64_t>(const CsrTensor<int64_t>&, const CsrTensor<int64_t>&,
                                        const CsrTensor<int64_t>&, const MaskList<int64_t>&, double);
template BackwardResult backward<int32_t>(const CsrTensor<int32_t>&, const CsrTensor<int32_t>&,
                                          const CsrTensor<int32_t>&, TensorView<const double>,
                                          const MaskList<int32_t>&, double);
template BackwardResult backward<int64_t>(const CsrTensor<int64_t>&, const CsrTensor<int64_t>&,
                                          const CsrTensor<int64_t>&, TensorView<const double>,
                                          const MaskList<int64_t>&, double);

}  // namespace spattn::reference
