// Attention on dense or CSR inputs, every (batch, head) (sparse_inputs.hpp): checks, then the
// planned algorithm through the same head runner as dense inputs (the CSR views load like any
// other; grouped-query dK, dV summed by kv_reduction.hpp as for dense inputs), or the fp64
// reference on the densified inputs.
#include <spattn/sparse_inputs.hpp>

#include "api/checks.hpp"
#include "api/head_runner.hpp"
#include "api/head_views.hpp"
#include "api/kv_reduction.hpp"
#include "api/sparse_inputs_detail.hpp"
#include "plan/planned_run.hpp"
#include "plan/planner.hpp"
#include "reference/csr_input_check.hpp"
#include "reference/finite_values.hpp"
#include "schedules/csr_inputs/input_views.hpp"

#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include <string>
#include <utility>
#include <vector>

namespace spattn {

using io::SlowMatrix;

namespace sparse_inputs_detail {
namespace {

// A (batch, heads, rows, cols) view with data when it has elements.
template <typename T>
void check_tensor(const char* where, const char* name, const TensorView<T>& t, int64_t batch, int64_t heads,
                  int64_t rows, int64_t cols, const char* shape_name) {
  if (t.batch() != batch || t.heads() != heads) {
    fail(where, ": ", name, " has batch ", t.batch(), " and heads ", t.heads(), ", expected ", batch, " and ",
         heads);
  }
  if (t.seqlen() != rows || t.head_dim() != cols) {
    fail(where, ": ", name, " is ", t.seqlen(), " x ", t.head_dim(), ", expected ", shape_name, " = ", rows,
         " x ", cols);
  }
  if (t.data == nullptr && t.numel() > 0) fail(where, ": ", name, " has no data but ", t.numel(), " elements");
}

void check_input(const char* where, const std::string& name, const AttentionInput& input) {
  if (input.is_csr()) {
    const CsrInput& csr = input.csr_view();
    if (csr.num_rows() < 0 || csr.num_cols() < 0) {
      fail(where, ": ", name, " is ", csr.num_rows(), " x ", csr.num_cols(), " (negative shape)");
    }
    detail::check_csr_input(where, name.c_str(), csr, csr.num_rows(), csr.num_cols(), "its shape");
  } else {
    const auto& t = input.dense_view();
    if (t.seqlen() < 0 || t.head_dim() < 0) {
      fail(where, ": ", name, " is ", t.seqlen(), " x ", t.head_dim(), " (negative shape)");
    }
    check_tensor(where, name.c_str(), t, 1, 1, t.seqlen(), t.head_dim(), "its shape");
    reference::check_finite(where, name.c_str(), t);  // (CSR values: check_csr_input refuses them too)
  }
}

// Every input of a list (q, k or v: `per_batch` heads of each batch entry) valid and of the
// first's shape. Its name is "q" for a one-head call, "q[i] (batch b, head h)" otherwise.
void check_list(const char* where, const char* list, const std::vector<AttentionInput>& inputs, int64_t batch,
                int64_t per_batch) {
  if (static_cast<int64_t>(inputs.size()) != batch * per_batch) {
    fail(where, ": ", list, " has ", inputs.size(), " inputs, expected batch x ",
         std::string(list) == "q" ? "heads" : "kv_heads", " = ", batch, " x ", per_batch, " = ", batch * per_batch);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name =
        inputs.size() == 1 ? std::string(list)
                           : std::string(list) + "[" + std::to_string(i) + "] (batch " +
                                 std::to_string(static_cast<int64_t>(i) / per_batch) + ", head " +
                                 std::to_string(static_cast<int64_t>(i) % per_batch) + ")";
    check_input(where, name, inputs[i]);
    const AttentionInput& first = inputs.front();
    if (inputs[i].seqlen() != first.seqlen() || inputs[i].head_dim() != first.head_dim()) {
      fail(where, ": ", name, " is ", inputs[i].seqlen(), " x ", inputs[i].head_dim(), ", ", list, "[0] is ",
           first.seqlen(), " x ", first.head_dim(), " (every head has the same shape)");
    }
  }
}

}  // namespace

bounds::DenseShape check_inputs(const char* where, const MultiHeadInputs& in) {
  if (in.batch < 1 || in.heads < 1 || in.kv_heads < 1 || in.heads % in.kv_heads != 0) {
    fail(where, ": batch ", in.batch, ", heads ", in.heads, ", kv_heads ", in.kv_heads,
         ": each must be at least 1 and kv_heads must divide heads");
  }
  check_list(where, "q", in.q, in.batch, in.heads);
  check_list(where, "k", in.k, in.batch, in.kv_heads);
  check_list(where, "v", in.v, in.batch, in.kv_heads);
  const AttentionInput &q = in.q.front(), &k = in.k.front(), &v = in.v.front();
  if (k.head_dim() != q.head_dim()) fail(where, ": k has head_dim ", k.head_dim(), ", q has ", q.head_dim());
  if (v.seqlen() != k.seqlen()) fail(where, ": v has seqlen ", v.seqlen(), ", k has ", k.seqlen());
  return {q.seqlen(), k.seqlen(), q.head_dim(), v.head_dim()};
}

std::vector<Mask> check_masks(const char* where, const HeadMasks& masks, const MultiHeadInputs& in,
                              const bounds::DenseShape& shape) {
  return api_detail::check_masks(where, masks, in.heads, shape.seqlen_q, shape.seqlen_k);
}

}  // namespace sparse_inputs_detail

namespace {

using api_detail::head_matrix;
using sparse_inputs_detail::check_inputs;
using sparse_inputs_detail::check_masks;
using sparse_inputs_detail::check_tensor;
using sparse_inputs_detail::head_mask;
using schedules::slow_matrix;

// Head (b, h) of a rank-4 tensor as a (1, 1, seqlen, dim) view.
template <typename T>
TensorView<T> head_view(const TensorView<T>& t, int64_t b, int64_t h) {
  return {t.row(b, h, 0), {1, 1, t.seqlen(), t.head_dim()}, t.stride};
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

// sum += from (one head's gradient, row-major; `sum` starts empty).
void add_into(const std::vector<double>& from, std::vector<double>& sum) {
  if (sum.empty()) sum.assign(from.size(), 0.0);
  for (size_t i = 0; i < from.size(); ++i) sum[i] += from[i];
}
void copy_out(const std::vector<double>& from, const TensorView<float>& to, int64_t b, int64_t h) {
  size_t i = 0;
  for (int64_t r = 0; r < to.seqlen(); ++r) {
    for (int64_t c = 0; c < to.head_dim(); ++c) to.at(b, h, r, c) = static_cast<float>(from[i++]);
  }
}

// The fp64 reference, head by head on the densified inputs; dK and dV summed over each group.
void reference_forward(const MultiHeadInputs& in, const TensorView<float>& o, const TensorView<float>& lse,
                       const std::vector<Mask>& masks, double scale) {
  for (int64_t b = 0; b < in.batch; ++b) {
    for (int64_t h = 0; h < in.heads; ++h) {
      const AttentionInputs head = in.head(b, h);
      const DoubleMatrix q = to_double(head.q), k = to_double(head.k), v = to_double(head.v);
      const auto result = reference::forward<int64_t>(q.view, k.view, v.view, {head_mask(masks, h).csr()}, scale);
      copy_out(result.o, o, b, h);
      copy_out(result.lse, lse, b, h);
    }
  }
}

void reference_backward(const MultiHeadInputs& in, const TensorView<const float>& d_o, const TensorView<float>& dq,
                        const TensorView<float>& dk, const TensorView<float>& dv, const std::vector<Mask>& masks,
                        double scale) {
  const int64_t group = in.heads / in.kv_heads;
  for (int64_t b = 0; b < in.batch; ++b) {
    for (int64_t g = 0; g < in.kv_heads; ++g) {
      std::vector<double> dk_sum, dv_sum;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        const AttentionInputs head = in.head(b, h);
        const DoubleMatrix q = to_double(head.q), k = to_double(head.k), v = to_double(head.v),
                           d_od = to_double(AttentionInput::dense(head_view(d_o, b, h)));
        const auto result = reference::backward<int64_t>(q.view, k.view, v.view, d_od.view,
                                                         {head_mask(masks, h).csr()}, scale);
        copy_out(result.dq, dq, b, h);
        add_into(result.dk, dk_sum);
        add_into(result.dv, dv_sum);
      }
      copy_out(dk_sum, dk, b, g);
      copy_out(dv_sum, dv, b, g);
    }
  }
}

// Runs every group of the plan, every batch entry of its heads: problem(b, h, its inputs).
template <typename Problem, typename MakeProblem>
void run_heads(const Plan& plan, const MultiHeadInputs& inputs, int threads, io::Ledger* ledger,
               MakeProblem&& problem) {
  for (const detail::PlannedGroup& group : plan.run->groups) {
    std::vector<Problem> problems;
    for (int64_t b = 0; b < inputs.batch; ++b) {
      for (const int64_t h : group.heads) problems.push_back(problem(b, h, inputs.head(b, h)));
    }
    api_detail::HeadRunner(group, plan.cache_words, threads).run(problems, ledger);
  }
}

}  // namespace

Plan attention_forward(const MultiHeadInputs& inputs, TensorView<float> o, TensorView<float> lse,
                       const HeadMasks& given, const AttentionOptions& options) {
  const char* where = "attention_forward (sparse inputs)";
  const bounds::DenseShape shape = check_inputs(where, inputs);
  const int64_t batch = inputs.batch, heads = inputs.heads;
  check_tensor(where, "o", o, batch, heads, shape.seqlen_q, shape.head_dim_v, "seqlen_q x head_dim_v");
  check_tensor(where, "lse", lse, batch, heads, shape.seqlen_q, 1, "seqlen_q x 1");
  const std::vector<Mask> masks = check_masks(where, given, inputs, shape);
  api_detail::check_outputs_apart(where, {api_detail::named("o", o), api_detail::named("lse", lse)}, {});
  const double scale = api_detail::resolve_scale(where, options, shape.head_dim);
  const int64_t cache_words = api_detail::resolve_cache(where, options);
  const int threads = api_detail::resolve_threads(where, options.threads);
  const Plan plan = plan_detail::plan_csr_inputs(shape, inputs, masks, cache_words,
                                                 api_detail::resolve_line_words(where, options, ElementType::fp32), Pass::forward,
                                                 options.algorithm);

  if (options.algorithm == Algorithm::reference) {
    reference_forward(inputs, o, lse, masks, scale);
    return plan;
  }
  const auto problem = [&](int64_t b, int64_t h, const AttentionInputs& head) {
    return schedules::HeadForward{slow_matrix(head.q), slow_matrix(head.k), slow_matrix(head.v),
                                  head_matrix(o, b, h), head_matrix(lse, b, h), static_cast<float>(scale)};
  };
  run_heads<schedules::HeadForward>(plan, inputs, threads, options.ledger, problem);
  return plan;
}

Plan attention_backward(const MultiHeadInputs& inputs, TensorView<const float> o, TensorView<const float> lse,
                        TensorView<const float> d_o, TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const HeadMasks& given, const AttentionOptions& options) {
  const char* where = "attention_backward (sparse inputs)";
  const bounds::DenseShape shape = check_inputs(where, inputs);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  const int64_t batch = inputs.batch, heads = inputs.heads, kv_heads = inputs.kv_heads;
  check_tensor(where, "o", o, batch, heads, m, e, "seqlen_q x head_dim_v");
  check_tensor(where, "lse", lse, batch, heads, m, 1, "seqlen_q x 1");
  check_tensor(where, "d_o", d_o, batch, heads, m, e, "seqlen_q x head_dim_v");
  check_tensor(where, "dq", dq, batch, heads, m, d, "seqlen_q x head_dim (q's shape)");
  check_tensor(where, "dk", dk, batch, kv_heads, n, d, "seqlen_k x head_dim (k's shape)");
  check_tensor(where, "dv", dv, batch, kv_heads, n, e, "seqlen_k x head_dim_v (v's shape)");
  const std::vector<Mask> masks = check_masks(where, given, inputs, shape);
  const int threads = api_detail::resolve_threads(where, options.threads);
  api_detail::check_finite_tensors({api_detail::finite_scan(where, "o", o),
                                    api_detail::finite_scan(where, "lse", lse, /*minus_infinity_allowed=*/true),
                                    api_detail::finite_scan(where, "d_o", d_o)},
                                   threads);
  api_detail::check_outputs_apart(
      where, {api_detail::named("dq", dq), api_detail::named("dk", dk), api_detail::named("dv", dv)},
      {api_detail::named("o", o), api_detail::named("lse", lse), api_detail::named("d_o", d_o)});
  const double scale = api_detail::resolve_scale(where, options, d);
  const int64_t cache_words = api_detail::resolve_cache(where, options);
  const Plan plan = plan_detail::plan_csr_inputs(shape, inputs, masks, cache_words,
                                                 api_detail::resolve_line_words(where, options, ElementType::fp32), Pass::backward,
                                                 options.algorithm);

  if (options.algorithm == Algorithm::reference) {
    reference_backward(inputs, d_o, dq, dk, dv, masks, scale);
    return plan;
  }
  // Grouped-query attention: each query head's dK, dV apart, the group's added up afterwards.
  api_detail::KvGradientSlots<float> gradients(dk, dv, heads, heads / kv_heads);
  const std::vector<api_detail::KvSum> sums = gradients.sums();
  std::vector<float> delta(static_cast<size_t>(batch * heads * m));  // slow-memory scratch for D, per head
  const auto problem = [&](int64_t b, int64_t h, const AttentionInputs& head) {
    float* head_delta = delta.data() + static_cast<size_t>((b * heads + h) * m);
    return schedules::HeadBackward{slow_matrix(head.q), slow_matrix(head.k), slow_matrix(head.v),
                                   head_matrix(o, b, h), head_matrix(lse, b, h), head_matrix(d_o, b, h),
                                   SlowMatrix<float>::dense(head_delta, m, 1), head_matrix(dq, b, h),
                                   gradients.dk(b, h), gradients.dv(b, h), static_cast<float>(scale)};
  };
  run_heads<schedules::HeadBackward>(plan, inputs, threads, options.ledger, problem);
  api_detail::sum_kv_gradients(sums, plan, threads, options.ledger);
  return plan;
}

Plan plan_attention(const MultiHeadInputs& inputs, const HeadMasks& given, Pass pass, const AttentionOptions& options) {
  const char* where = "plan_attention (sparse inputs)";
  const bounds::DenseShape shape = check_inputs(where, inputs);
  const std::vector<Mask> masks = check_masks(where, given, inputs, shape);
  return plan_detail::plan_csr_inputs(shape, inputs, masks, api_detail::resolve_cache(where, options),
                                      api_detail::resolve_line_words(where, options, ElementType::fp32), pass, options.algorithm);
}

}  // namespace spattn
