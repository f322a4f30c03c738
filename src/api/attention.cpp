// The public attention entry points: validate once (checks.hpp), plan the call
// (plan/planner.hpp; plan_attention previews the same), then run each group of the plan's heads
// on a team of workers (head_runner.hpp). Grouped-query attention points every query head's K, V
// at its kv head; in the backward, each query head's dK, dV is computed apart and the group's
// are added up afterwards (kv_reduction.hpp). float, half_t and bfloat16_t calls run the same
// code: the schedules see float views of any element type (head_views.hpp).
#include <spattn/attention.hpp>

#include "api/checks.hpp"
#include "api/head_runner.hpp"
#include "api/head_views.hpp"
#include "api/kv_reduction.hpp"
#include "api/reference_path.hpp"
#include "plan/planned_run.hpp"
#include "plan/planner.hpp"

#include <algorithm>
#include <vector>

namespace spattn {

namespace {

using namespace api_detail;
using io::SlowMatrix;

// Query heads per kv head (grouped-query attention; 1 for multi-head attention).
template <typename T>
int64_t group_size(const TensorView<const T>& q, const TensorView<const T>& k) {
  return k.heads() > 0 ? std::max<int64_t>(q.heads() / k.heads(), 1) : 1;
}

// The one place a call is planned: attention_forward / attention_backward and plan_attention.
Plan plan_call(const bounds::DenseShape& shape, const plan_detail::CallHeads& heads, const std::vector<Mask>& masks,
               Pass pass, ElementType element, const char* where, const AttentionOptions& options) {
  return plan_detail::plan_dense_inputs(shape, masks, heads, resolve_cache(where, options),
                                        resolve_line_words(where, options, element), pass, options.algorithm,
                                        options.objective);
}

template <typename T>
plan_detail::CallHeads call_heads(const TensorView<const T>& q, const TensorView<const T>& k) {
  return {q.batch(), q.heads(), k.heads()};
}

// Runs every group of the plan, every batch entry of its heads; problem(b, h) is head (b, h)'s.
template <typename Problem, typename MakeProblem>
void run_groups(const Plan& plan, int64_t batch, int threads, io::Ledger* ledger, MakeProblem&& problem) {
  for (const detail::PlannedGroup& group : plan.run->groups) {
    std::vector<Problem> heads;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h : group.heads) heads.push_back(problem(b, h));
    }
    HeadRunner(group, plan.cache_words, threads).run(heads, ledger);
  }
}

template <typename T>
Plan forward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v, TensorView<T> o,
             TensorView<float> lse, const HeadMasks& given, const AttentionOptions& options) {
  const char* where = "attention_forward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v);
  check_per_query(where, "o", o, q);
  check_value_dim(where, "o", o.head_dim(), v);
  check_lse(where, lse, q);
  const std::vector<Mask> masks = check_masks(where, given, q.heads(), q.seqlen(), k.seqlen());
  check_outputs_apart(where, {named("o", o), named("lse", lse)}, {named("q", q), named("k", k), named("v", v)});
  const int threads = resolve_threads(where, options.threads);
  check_finite_tensors({finite_scan(where, "q", q), finite_scan(where, "k", k), finite_scan(where, "v", v)}, threads);
  const double scale = resolve_scale(where, options, q.head_dim());
  const Plan plan = plan_call(shape, call_heads(q, k), masks, Pass::forward, element_type_of<T>(), where, options);

  if (options.algorithm == Algorithm::reference) {
    reference_forward(q, k, v, o, lse, masks, scale);
    return plan;
  }
  const int64_t group = group_size(q, k);
  run_groups<schedules::HeadForward>(plan, q.batch(), threads, options.ledger, [&](int64_t b, int64_t h) {
    return schedules::HeadForward{head_matrix(q, b, h), head_matrix(k, b, h / group), head_matrix(v, b, h / group),
                                  head_matrix(o, b, h), head_matrix(lse, b, h), static_cast<float>(scale)};
  });
  return plan;
}

template <typename T>
Plan backward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v, TensorView<const T> o,
              TensorView<const float> lse, TensorView<const T> d_o, TensorView<T> dq, TensorView<T> dk,
              TensorView<T> dv, const HeadMasks& given, const AttentionOptions& options) {
  const char* where = "attention_backward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v);
  for (const auto& [name, t] : {std::pair<const char*, TensorView<const T>>{"o", o}, {"d_o", d_o}}) {
    check_per_query(where, name, t, q);
    check_value_dim(where, name, t.head_dim(), v);
  }
  check_lse(where, lse, q);
  check_gradient(where, "dq", dq, q);
  check_gradient(where, "dk", dk, k);
  check_gradient(where, "dv", dv, v);
  const std::vector<Mask> masks = check_masks(where, given, q.heads(), q.seqlen(), k.seqlen());
  check_outputs_apart(where, {named("dq", dq), named("dk", dk), named("dv", dv)},
                      {named("q", q), named("k", k), named("v", v), named("o", o), named("lse", lse), named("d_o", d_o)});
  const int threads = resolve_threads(where, options.threads);
  check_finite_tensors({finite_scan(where, "q", q), finite_scan(where, "k", k), finite_scan(where, "v", v),
                        finite_scan(where, "o", o), finite_scan(where, "lse", lse, /*minus_infinity_allowed=*/true),
                        finite_scan(where, "d_o", d_o)},
                       threads);
  const double scale = resolve_scale(where, options, q.head_dim());
  const Plan plan = plan_call(shape, call_heads(q, k), masks, Pass::backward, element_type_of<T>(), where, options);

  if (options.algorithm == Algorithm::reference) {
    reference_backward(q, k, v, d_o, dq, dk, dv, masks, scale);
    return plan;
  }
  const int64_t group = group_size(q, k);
  KvGradientSlots<T> gradients(dk, dv, q.heads(), group);
  const std::vector<KvSum> sums = gradients.sums();
  // Slow-memory scratch for D, one column per head (the heads run at the same time).
  std::vector<float> delta(static_cast<size_t>(q.batch() * q.heads() * q.seqlen()));
  run_groups<schedules::HeadBackward>(plan, q.batch(), threads, options.ledger, [&](int64_t b, int64_t h) {
    float* head_delta = delta.data() + static_cast<size_t>((b * q.heads() + h) * q.seqlen());
    return schedules::HeadBackward{head_matrix(q, b, h), head_matrix(k, b, h / group), head_matrix(v, b, h / group),
                                   head_matrix(o, b, h), head_matrix(lse, b, h), head_matrix(d_o, b, h),
                                   SlowMatrix<float>::dense(head_delta, q.seqlen(), 1), head_matrix(dq, b, h),
                                   gradients.dk(b, h), gradients.dv(b, h), static_cast<float>(scale)};
  });
  sum_kv_gradients(sums, plan, threads, options.ledger);
  return plan;
}

}  // namespace

Plan attention_forward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
                       TensorView<float> o, TensorView<float> lse, const HeadMasks& masks,
                       const AttentionOptions& options) {
  return forward(q, k, v, o, lse, masks, options);
}
Plan attention_forward(TensorView<const half_t> q, TensorView<const half_t> k, TensorView<const half_t> v,
                       TensorView<half_t> o, TensorView<float> lse, const HeadMasks& masks,
                       const AttentionOptions& options) {
  return forward(q, k, v, o, lse, masks, options);
}
Plan attention_forward(TensorView<const bfloat16_t> q, TensorView<const bfloat16_t> k,
                       TensorView<const bfloat16_t> v, TensorView<bfloat16_t> o, TensorView<float> lse,
                       const HeadMasks& masks, const AttentionOptions& options) {
  return forward(q, k, v, o, lse, masks, options);
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
                        TensorView<const float> o, TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv, const HeadMasks& masks,
                        const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, masks, options);
}
Plan attention_backward(TensorView<const half_t> q, TensorView<const half_t> k, TensorView<const half_t> v,
                        TensorView<const half_t> o, TensorView<const float> lse, TensorView<const half_t> d_o,
                        TensorView<half_t> dq, TensorView<half_t> dk, TensorView<half_t> dv, const HeadMasks& masks,
                        const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, masks, options);
}
Plan attention_backward(TensorView<const bfloat16_t> q, TensorView<const bfloat16_t> k,
                        TensorView<const bfloat16_t> v, TensorView<const bfloat16_t> o, TensorView<const float> lse,
                        TensorView<const bfloat16_t> d_o, TensorView<bfloat16_t> dq, TensorView<bfloat16_t> dk,
                        TensorView<bfloat16_t> dv, const HeadMasks& masks, const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, masks, options);
}

Plan plan_attention(const AttentionShape& call, const HeadMasks& given, Pass pass, const AttentionOptions& options) {
  const char* where = "plan_attention";
  const bounds::DenseShape shape = check_shape(where, call);
  const std::vector<Mask> masks = check_masks(where, given, call.heads, call.seqlen_q, call.seqlen_k);
  return plan_call(shape, {call.batch, call.heads, call.kv_heads}, masks, pass, call.element, where, options);
}

}  // namespace spattn
