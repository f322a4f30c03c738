// The public attention entry points: validate once (checks.hpp), plan every head over its mask
// (head_masks.hpp), then run each mask's heads on a team of workers (head_runner.hpp). Grouped-
// query attention points every query head's K, V at its kv head; in the backward, each query
// head's dK, dV is computed apart and the group's are added up afterwards (kv_reduction.hpp).
#include <spattn/attention.hpp>

#include "api/checks.hpp"
#include "api/head_masks.hpp"
#include "api/head_runner.hpp"
#include "api/head_views.hpp"
#include "api/kv_reduction.hpp"
#include "api/reference_path.hpp"
#include "cpu/workers.hpp"

#include <algorithm>
#include <vector>

namespace spattn {

namespace {

using namespace api_detail;
using io::SlowMatrix;

// Query heads per kv head (grouped-query attention; 1 for multi-head attention).
int64_t group_size(const TensorView<const float>& q, const TensorView<const float>& k) {
  return k.heads() > 0 ? std::max<int64_t>(q.heads() / k.heads(), 1) : 1;
}

Mask full_mask(const TensorView<const float>& q, const TensorView<const float>& k) {
  return Mask::full(std::max<int64_t>(q.seqlen(), 0), std::max<int64_t>(k.seqlen(), 0));
}

struct RunSettings {
  Pass pass;
  int64_t cache_words;
  int threads;
  io::Ledger* ledger;
};

// Runs every mask group's heads, of every batch entry, with the group's plan; problem(b, h) is
// head (b, h)'s problem.
template <typename Problem, typename MakeProblem>
void run_groups(const HeadsPlan& planned, int64_t batch, const RunSettings& run, MakeProblem&& problem) {
  for (const MaskGroup& mask_group : planned.groups) {
    const HeadRunner runner(mask_group.plan.algorithm, mask_group.plan.shape, mask_group.mask, run.cache_words,
                            run.pass, run.threads, mask_group.plan.objective);
    std::vector<Problem> heads;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h : mask_group.heads) heads.push_back(problem(b, h));
    }
    runner.run(heads, run.ledger);
  }
}

Plan forward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
             TensorView<float> o, TensorView<float> lse, const std::vector<Mask>& masks, bool per_head,
             const AttentionOptions& options) {
  const char* where = "attention_forward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v);
  check_per_query(where, "o", o, q);
  check_value_dim(where, "o", o.head_dim(), v);
  check_lse(where, lse, q);
  check_masks(where, masks, per_head, q, k);
  const double scale = resolve_scale(where, options, q.head_dim());
  const int64_t cache_words = resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  const HeadsPlan planned =
      plan_heads(shape, masks, q.batch(), q.heads(), cache_words, Pass::forward, options.algorithm,
                 options.objective);

  if (options.algorithm == Algorithm::reference) {
    reference_forward(q, k, v, o, lse, masks, scale);
    return planned.plan;
  }
  const int64_t group = group_size(q, k);
  const RunSettings run{Pass::forward, cache_words, threads, options.ledger};
  run_groups<schedules::HeadForward>(planned, q.batch(), run, [&](int64_t b, int64_t h) {
    return schedules::HeadForward{head_matrix(q, b, h), head_matrix(k, b, h / group), head_matrix(v, b, h / group),
                                  head_matrix(o, b, h), head_matrix(lse, b, h), static_cast<float>(scale)};
  });
  return planned.plan;
}

Plan backward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
              TensorView<const float> o, TensorView<const float> lse, TensorView<const float> d_o,
              TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
              const std::vector<Mask>& masks, bool per_head, const AttentionOptions& options) {
  const char* where = "attention_backward";
  const bounds::DenseShape shape = check_qkv(where, q, k, v);
  for (const auto& [name, t] : {std::pair<const char*, TensorView<const float>>{"o", o}, {"d_o", d_o}}) {
    check_per_query(where, name, t, q);
    check_value_dim(where, name, t.head_dim(), v);
  }
  check_lse(where, lse, q);
  check_gradient(where, "dq", dq, q);
  check_gradient(where, "dk", dk, k);
  check_gradient(where, "dv", dv, v);
  check_masks(where, masks, per_head, q, k);
  const double scale = resolve_scale(where, options, q.head_dim());
  const int64_t cache_words = resolve_cache(where, options);
  const int threads = cpu::resolve_threads(where, options.threads);
  HeadsPlan planned = plan_heads(shape, masks, q.batch(), q.heads(), cache_words, Pass::backward, options.algorithm,
                                 options.objective);

  if (options.algorithm == Algorithm::reference) {
    reference_backward(q, k, v, d_o, dq, dk, dv, masks, scale);
    return planned.plan;
  }
  const int64_t group = group_size(q, k);
  KvGradientSlots gradients(dk, dv, q.heads(), group);
  const std::vector<KvSum> sums = gradients.sums();
  const KvSumWords sum_words = predict_kv_sums(sums);
  add_kv_sum_words(planned.plan, sum_words.reads, sum_words.writes);
  // Slow-memory scratch for D, one column per head (the heads run at the same time).
  std::vector<float> delta(static_cast<size_t>(q.batch() * q.heads() * q.seqlen()));
  const RunSettings run{Pass::backward, cache_words, threads, options.ledger};
  run_groups<schedules::HeadBackward>(planned, q.batch(), run, [&](int64_t b, int64_t h) {
    float* head_delta = delta.data() + static_cast<size_t>((b * q.heads() + h) * q.seqlen());
    return schedules::HeadBackward{head_matrix(q, b, h), head_matrix(k, b, h / group), head_matrix(v, b, h / group),
                                   head_matrix(o, b, h), head_matrix(lse, b, h), head_matrix(d_o, b, h),
                                   SlowMatrix<float>::dense(head_delta, q.seqlen(), 1), head_matrix(dq, b, h),
                                   gradients.dk(b, h), gradients.dv(b, h), static_cast<float>(scale)};
  });
  sum_kv_gradients(sums, cache_words, threads, options.ledger);
  return planned.plan;
}

}  // namespace

Plan attention_forward(TensorView<const float> q, TensorView<const float> k,
                       TensorView<const float> v, TensorView<float> o, TensorView<float> lse,
                       const AttentionOptions& options) {
  return forward(q, k, v, o, lse, {full_mask(q, k)}, false, options);
}

Plan attention_forward(TensorView<const float> q, TensorView<const float> k,
                       TensorView<const float> v, TensorView<float> o, TensorView<float> lse,
                       const Mask& mask, const AttentionOptions& options) {
  return forward(q, k, v, o, lse, {mask}, false, options);
}

Plan attention_forward(TensorView<const float> q, TensorView<const float> k,
                       TensorView<const float> v, TensorView<float> o, TensorView<float> lse,
                       const std::vector<Mask>& masks, const AttentionOptions& options) {
  return forward(q, k, v, o, lse, masks, true, options);
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k,
                        TensorView<const float> v, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, {full_mask(q, k)}, false, options);
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k,
                        TensorView<const float> v, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const Mask& mask, const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, {mask}, false, options);
}

Plan attention_backward(TensorView<const float> q, TensorView<const float> k,
                        TensorView<const float> v, TensorView<const float> o,
                        TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const std::vector<Mask>& masks, const AttentionOptions& options) {
  return backward(q, k, v, o, lse, d_o, dq, dk, dv, masks, true, options);
}

}  // namespace spattn
