// 16-bit calls through the CPU API for the tests (element_types_test.cpp,
// bf16_pair_products_test.cpp): forward, then backward, with the ledger's counts checked against
// the plans.
#pragma once

#include "support/half_precision.hpp"

#include <spattn/attention.hpp>
#include <spattn/io.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace spattn::testing::half_precision {

// Forward, then backward from the run's own O in T (as a training step runs); outputs start as
// NaN, so an element nothing writes shows up. With a plan to fill, the call is counted and its
// ledger checked against the plan, in words and in lines of 64 bytes (32 16-bit words, 16 floats).
template <typename T>
Outputs run_cpu(const Problem& p, const std::vector<Mask>& masks, AttentionOptions options,
                Plan* forward_plan = nullptr, Plan* backward_plan = nullptr) {
  const std::vector<T> q = to_elements<T>(p.q), k = to_elements<T>(p.k), v = to_elements<T>(p.v);
  const std::vector<T> d_o = to_elements<T>(p.d_o);
  std::vector<T> o = nan_filled<T>(p.o_numel()), dq = nan_filled<T>(p.q_numel());
  std::vector<T> dk = nan_filled<T>(p.k_numel()), dv = nan_filled<T>(p.v_numel());
  std::vector<float> lse(static_cast<size_t>(p.batch * p.heads * p.n_q), NAN);
  auto in = [&](const std::vector<T>& x, int64_t heads, int64_t n, int64_t dim) {
    return TensorView<const T>::contiguous(x.data(), p.batch, heads, n, dim);
  };
  auto out = [&](std::vector<T>& x, int64_t heads, int64_t n, int64_t dim) {
    return TensorView<T>::contiguous(x.data(), p.batch, heads, n, dim);
  };
  const HeadMasks head_masks = masks.size() == 1 ? HeadMasks(masks.front()) : HeadMasks(masks);
  constexpr int64_t kLineWords = 64 / static_cast<int64_t>(sizeof(T));
  io::Ledger forward_ledger(kLineWords), backward_ledger(kLineWords);
  options.ledger = forward_plan != nullptr ? &forward_ledger : nullptr;
  const Plan forward = attention_forward(in(q, p.heads, p.n_q, p.d), in(k, p.kv_heads, p.n_k, p.d),
                                         in(v, p.kv_heads, p.n_k, p.e), out(o, p.heads, p.n_q, p.e),
                                         TensorView<float>::contiguous(lse.data(), p.batch, p.heads, p.n_q, 1),
                                         head_masks, options);
  options.ledger = backward_plan != nullptr ? &backward_ledger : nullptr;
  const Plan backward = attention_backward(
      in(q, p.heads, p.n_q, p.d), in(k, p.kv_heads, p.n_k, p.d), in(v, p.kv_heads, p.n_k, p.e),
      in(o, p.heads, p.n_q, p.e), TensorView<const float>::contiguous(lse.data(), p.batch, p.heads, p.n_q, 1),
      in(d_o, p.heads, p.n_q, p.e), out(dq, p.heads, p.n_q, p.d), out(dk, p.kv_heads, p.n_k, p.d),
      out(dv, p.kv_heads, p.n_k, p.e), head_masks, options);
  // Counted == predicted, in words and in the ledger's lines.
  for (const auto& [plan, ledger, target] : {std::tuple{&forward, &forward_ledger, forward_plan},
                                             std::tuple{&backward, &backward_ledger, backward_plan}}) {
    if (target == nullptr) continue;
    *target = *plan;
    EXPECT_EQ(plan->line_words, kLineWords);
    EXPECT_EQ(ledger->reads(), plan->reads);
    EXPECT_EQ(ledger->writes(), plan->writes);
    if (plan->lines_predicted) {
      EXPECT_EQ(ledger->total_lines().reads, plan->read_lines);
      EXPECT_EQ(ledger->total_lines().writes, plan->write_lines);
    }
  }
  return {to_floats(o), lse, to_floats(dq), to_floats(dk), to_floats(dv)};
}

inline AttentionOptions options_for(Algorithm algorithm, int threads = 2) {
  AttentionOptions options;
  options.algorithm = algorithm;
  // Several tiles per head at these sizes; small_cache's tiles fit a far smaller M.
  options.cache_words = algorithm == Algorithm::small_cache ? 600 : 4096;
  options.threads = threads;
  return options;
}

}  // namespace spattn::testing::half_precision
