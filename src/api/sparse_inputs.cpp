// Attention on dense or CSR inputs, one head (sparse_inputs.hpp): checks, then the planned
// algorithm through the same head runner as dense inputs (the CSR views load like any other), or
// the fp64 reference on the densified inputs.
#include <spattn/sparse_inputs.hpp>

#include "api/checks.hpp"
#include "api/head_runner.hpp"
#include "api/sparse_inputs_detail.hpp"
#include "cpu/workers.hpp"
#include "reference/csr_input_check.hpp"

#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include <vector>

namespace spattn {

using io::SlowMatrix;

// ---- inputs -------------------------------------------------------------------------------------

AttentionInput AttentionInput::dense(TensorView<const float> matrix) {
  AttentionInput input;
  input.dense_ = matrix;
  return input;
}

AttentionInput AttentionInput::csr(const CsrInput& matrix) {
  AttentionInput input;
  input.is_csr_ = true;
  input.csr_ = matrix;
  return input;
}

int64_t AttentionInput::seqlen() const { return is_csr_ ? csr_.num_rows() : dense_.seqlen(); }
int64_t AttentionInput::head_dim() const { return is_csr_ ? csr_.num_cols() : dense_.head_dim(); }
int64_t AttentionInput::nnz() const { return is_csr_ ? csr_.nnz() : seqlen() * head_dim(); }

double AttentionInputs::z_input() const {
  return 0.5 * (static_cast<double>(q.nnz()) + static_cast<double>(k.nnz()));
}

namespace sparse_inputs_detail {
namespace {

// A one-head matrix view: (1, 1, rows, cols) with data when it has elements.
template <typename T>
void check_matrix(const char* where, const char* name, const TensorView<T>& t, int64_t rows,
                  int64_t cols, const char* shape_name) {
  if (t.batch() != 1 || t.heads() != 1) {
    fail(where, ": ", name, " has batch ", t.batch(), " and heads ", t.heads(),
         "; sparse inputs take one head (batch = heads = 1)");
  }
  if (t.seqlen() != rows || t.head_dim() != cols) {
    fail(where, ": ", name, " is ", t.seqlen(), " x ", t.head_dim(), ", expected ", shape_name, " = ",
         rows, " x ", cols);
  }
  if (t.data == nullptr && rows * cols > 0) fail(where, ": ", name, " has no data but ", rows * cols, " elements");
}

void check_input(const char* where, const char* name, const AttentionInput& input) {
  if (input.is_csr()) {
    const CsrInput& csr = input.csr_view();
    if (csr.num_rows() < 0 || csr.num_cols() < 0) {
      fail(where, ": ", name, " is ", csr.num_rows(), " x ", csr.num_cols(), " (negative shape)");
    }
    detail::check_csr_input(where, name, csr, csr.num_rows(), csr.num_cols(), "its shape");
  } else {
    const auto& t = input.dense_view();
    if (t.seqlen() < 0 || t.head_dim() < 0) {
      fail(where, ": ", name, " is ", t.seqlen(), " x ", t.head_dim(), " (negative shape)");
    }
    check_matrix(where, name, t, t.seqlen(), t.head_dim(), "its shape");
  }
}

}  // namespace

bounds::DenseShape check_inputs(const char* where, const AttentionInputs& in) {
  check_input(where, "q", in.q);
  check_input(where, "k", in.k);
  check_input(where, "v", in.v);
  if (in.k.head_dim() != in.q.head_dim()) {
    fail(where, ": k has head_dim ", in.k.head_dim(), ", q has ", in.q.head_dim());
  }
  if (in.v.seqlen() != in.k.seqlen()) fail(where, ": v has seqlen ", in.v.seqlen(), ", k has ", in.k.seqlen());
  return {in.q.seqlen(), in.k.seqlen(), in.q.head_dim(), in.v.head_dim()};
}

SlowMatrix<const float> slow_matrix(const AttentionInput& input) {
  if (input.is_csr()) return SlowMatrix<const float>::csr(input.csr_view());
  const auto& t = input.dense_view();
  return SlowMatrix<const float>(t.seqlen() > 0 ? t.row(0, 0, 0) : t.data, t.seqlen(), t.head_dim(),
                                 t.stride[2], t.stride[3]);
}

}  // namespace sparse_inputs_detail

namespace {

using sparse_inputs_detail::check_inputs;
using sparse_inputs_detail::slow_matrix;

template <typename T>
SlowMatrix<T> matrix_of(const TensorView<T>& t) {
  return SlowMatrix<T>(t.seqlen() > 0 ? t.row(0, 0, 0) : t.data, t.seqlen(), t.head_dim(), t.stride[2],
                       t.stride[3]);
}

// The densified input in double, for the reference.
struct DoubleMatrix {
  std::vector<double> data;
  TensorView<const double> view;
};
DoubleMatrix to_double(const AttentionInput& input) {
  const int64_t rows = input.seqlen(), cols = input.head_dim();
  DoubleMatrix out;
  out.data.assign(static_cast<size_t>(rows * cols), 0.0);
  if (input.is_csr()) {
    const CsrInput& csr = input.csr_view();
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = csr.pattern.row_begin(r); p < csr.pattern.row_end(r); ++p) {
        out.data[static_cast<size_t>(r * cols + csr.pattern.col_idx[p])] = csr.values[p];
      }
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) out.data[static_cast<size_t>(r * cols + c)] = input.dense_view().at(0, 0, r, c);
    }
  }
  out.view = TensorView<const double>::matrix(out.data.data(), rows, cols);
  return out;
}
DoubleMatrix to_double(const TensorView<const float>& t) { return to_double(AttentionInput::dense(t)); }

void copy_out(const std::vector<double>& from, const TensorView<float>& to) {
  size_t i = 0;
  for (int64_t r = 0; r < to.seqlen(); ++r) {
    for (int64_t c = 0; c < to.head_dim(); ++c) to.at(0, 0, r, c) = static_cast<float>(from[i++]);
  }
}

void check_mask_shape(const char* where, const Mask& mask, const bounds::DenseShape& shape) {
  if (mask.seqlen_q() != shape.seqlen_q || mask.seqlen_k() != shape.seqlen_k) {
    fail(where, ": mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", but q has seqlen ",
         shape.seqlen_q, " and k has seqlen ", shape.seqlen_k);
  }
}

Algorithm planned_algorithm(const AttentionOptions& options) {
  return options.algorithm == Algorithm::reference ? Algorithm::automatic : options.algorithm;
}

}  // namespace

Plan attention_forward(const AttentionInputs& inputs, TensorView<float> o, TensorView<float> lse,
                       const Mask& mask, const AttentionOptions& options) {
  const char* where = "attention_forward (sparse inputs)";
  const bounds::DenseShape shape = check_inputs(where, inputs);
  sparse_inputs_detail::check_matrix(where, "o", o, shape.seqlen_q, shape.head_dim_v, "seqlen_q x head_dim_v");
  sparse_inputs_detail::check_matrix(where, "lse", lse, shape.seqlen_q, 1, "seqlen_q x 1");
  check_mask_shape(where, mask, shape);
  const double scale = api_detail::resolve_scale(where, options, shape.head_dim);
  const int64_t cache_words = api_detail::resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  const Plan plan = plan_attention(inputs, mask, cache_words, Pass::forward, planned_algorithm(options));

  if (options.algorithm == Algorithm::reference) {
    const DoubleMatrix q = to_double(inputs.q), k = to_double(inputs.k), v = to_double(inputs.v);
    const auto result = reference::forward<int64_t>(q.view, k.view, v.view, {mask.csr()}, scale);
    copy_out(result.o, o);
    copy_out(result.lse, lse);
    return plan;
  }
  const std::vector<schedules::HeadForward> heads{{slow_matrix(inputs.q), slow_matrix(inputs.k),
                                                   slow_matrix(inputs.v), matrix_of(o), matrix_of(lse),
                                                   static_cast<float>(scale)}};
  api_detail::HeadRunner(plan.algorithm, plan.shape, mask, cache_words, Pass::forward, threads)
      .run(heads, options.ledger);
  return plan;
}

Plan attention_backward(const AttentionInputs& inputs, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const Mask& mask, const AttentionOptions& options) {
  const char* where = "attention_backward (sparse inputs)";
  const bounds::DenseShape shape = check_inputs(where, inputs);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  sparse_inputs_detail::check_matrix(where, "o", o, m, e, "seqlen_q x head_dim_v");
  sparse_inputs_detail::check_matrix(where, "lse", lse, m, 1, "seqlen_q x 1");
  sparse_inputs_detail::check_matrix(where, "d_o", d_o, m, e, "seqlen_q x head_dim_v");
  sparse_inputs_detail::check_matrix(where, "dq", dq, m, d, "seqlen_q x head_dim (q's shape)");
  sparse_inputs_detail::check_matrix(where, "dk", dk, n, d, "seqlen_k x head_dim (k's shape)");
  sparse_inputs_detail::check_matrix(where, "dv", dv, n, e, "seqlen_k x head_dim_v (v's shape)");
  check_mask_shape(where, mask, shape);
  const double scale = api_detail::resolve_scale(where, options, d);
  const int64_t cache_words = api_detail::resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  const Plan plan = plan_attention(inputs, mask, cache_words, Pass::backward, planned_algorithm(options));

  if (options.algorithm == Algorithm::reference) {
    const DoubleMatrix q = to_double(inputs.q), k = to_double(inputs.k), v = to_double(inputs.v),
                       d_od = to_double(d_o);
    const auto result = reference::backward<int64_t>(q.view, k.view, v.view, d_od.view, {mask.csr()}, scale);
    copy_out(result.dq, dq);
    copy_out(result.dk, dk);
    copy_out(result.dv, dv);
    return plan;
  }
  std::vector<float> delta(static_cast<size_t>(m));  // slow-memory scratch for D
  const std::vector<schedules::HeadBackward> heads{
      {slow_matrix(inputs.q), slow_matrix(inputs.k), slow_matrix(inputs.v), matrix_of(o), matrix_of(lse),
       matrix_of(d_o), SlowMatrix<float>::dense(delta.data(), m, 1), matrix_of(dq), matrix_of(dk),
       matrix_of(dv), static_cast<float>(scale)}};
  api_detail::HeadRunner(plan.algorithm, plan.shape, mask, cache_words, Pass::backward, threads)
      .run(heads, options.ledger);
  return plan;
}

}  // namespace spattn
