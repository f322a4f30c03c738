// An attention problem for the public API's tests: batch x heads query heads over kv_heads kv
// heads (grouped-query attention when fewer), seqlen_q x seqlen_k, head_dim d; random inputs,
// poisoned outputs (every entry must be written), and the fp64 reference for the same masks.
#pragma once

#include <spattn/attention.hpp>
#include <spattn/reference.hpp>

#include "support/compare.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

namespace spattn::testing {

struct ApiProblem {
  int64_t batch, heads, kv_heads, n_q, n_k, d;
  std::vector<float> q, k, v, d_o;
  std::vector<float> o, lse, dq, dk, dv;

  // q, k, v, dO uniform in [-1, 1) from the seeds seed, seed + 1, seed + 2, seed + 3.
  ApiProblem(int64_t batch_, int64_t heads_, int64_t kv_heads_, int64_t n_q_, int64_t n_k_, int64_t d_,
             uint32_t seed = 21)
      : batch(batch_), heads(heads_), kv_heads(kv_heads_), n_q(n_q_), n_k(n_k_), d(d_) {
    q = random_floats(static_cast<int64_t>(size(heads, n_q)), seed);
    k = random_floats(static_cast<int64_t>(size(kv_heads, n_k)), seed + 1);
    v = random_floats(static_cast<int64_t>(size(kv_heads, n_k)), seed + 2);
    d_o = random_floats(static_cast<int64_t>(size(heads, n_q)), seed + 3);
  }
  size_t size(int64_t h, int64_t n) const { return static_cast<size_t>(batch * h * n * d); }
  TensorView<const float> in(const std::vector<float>& x, int64_t h, int64_t n, int64_t last) const {
    return TensorView<const float>::contiguous(x.data(), batch, h, n, last);
  }
  TensorView<float> out(std::vector<float>& x, int64_t h, int64_t n, int64_t last) const {
    return TensorView<float>::contiguous(x.data(), batch, h, n, last);
  }

  // Forward then backward with the mask argument `masks`.
  std::pair<Plan, Plan> run_with(const HeadMasks& masks, const AttentionOptions& forward_options,
                                 const AttentionOptions& backward_options) {
    o.assign(size(heads, n_q), std::nanf(""));
    lse.assign(static_cast<size_t>(batch * heads * n_q), std::nanf(""));
    dq.assign(size(heads, n_q), std::nanf(""));
    dk.assign(size(kv_heads, n_k), std::nanf(""));
    dv.assign(size(kv_heads, n_k), std::nanf(""));
    const auto qv = in(q, heads, n_q, d), kv = in(k, kv_heads, n_k, d), vv = in(v, kv_heads, n_k, d);
    const Plan forward = attention_forward(qv, kv, vv, out(o, heads, n_q, d), out(lse, heads, n_q, 1), masks,
                                           forward_options);
    const Plan backward = attention_backward(qv, kv, vv, in(o, heads, n_q, d), in(lse, heads, n_q, 1),
                                             in(d_o, heads, n_q, d), out(dq, heads, n_q, d),
                                             out(dk, kv_heads, n_k, d), out(dv, kv_heads, n_k, d), masks,
                                             backward_options);
    return {forward, backward};
  }
  // The same over `masks` (one Mask: shared; several: one per query head).
  std::pair<Plan, Plan> run(const std::vector<Mask>& masks, const AttentionOptions& forward_options,
                            const AttentionOptions& backward_options) {
    return run_with(masks.size() == 1 ? HeadMasks(masks.front()) : HeadMasks(masks), forward_options,
                    backward_options);
  }
  std::pair<Plan, Plan> run(const std::vector<Mask>& masks, const AttentionOptions& options) {
    return run(masks, options, options);
  }

  // The fp64 reference's results for the same masks, compared within fp32_tolerance; the
  // gradients must be non-trivial.
  void expect_matches_reference(const std::vector<Mask>& masks) const {
    auto wide = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const auto qd = wide(q), kd = wide(k), vd = wide(v), dod = wide(d_o);
    auto view = [&](const std::vector<double>& x, int64_t h, int64_t n) {
      return TensorView<const double>::contiguous(x.data(), batch, h, n, d);
    };
    reference::MaskList<int64_t> list;
    for (const Mask& mask : masks) list.push_back(mask.csr());
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const auto forward = reference::forward<int64_t>(view(qd, heads, n_q), view(kd, kv_heads, n_k),
                                                     view(vd, kv_heads, n_k), list, scale);
    const auto backward = reference::backward<int64_t>(view(qd, heads, n_q), view(kd, kv_heads, n_k),
                                                       view(vd, kv_heads, n_k), view(dod, heads, n_q), list, scale);
    // A kv head's gradient sums heads / kv_heads query heads' contributions.
    const double tolerance = fp32_tolerance(d + n_k, 1.0) * static_cast<double>(heads / kv_heads);
    EXPECT_LE(max_abs_error(o, forward.o), tolerance);
    EXPECT_LE(max_abs_error(lse, forward.lse), tolerance);
    EXPECT_LE(max_abs_error(dq, backward.dq), tolerance);
    EXPECT_LE(max_abs_error(dk, backward.dk), tolerance);
    EXPECT_LE(max_abs_error(dv, backward.dv), tolerance);
    if (n_q > 1 && n_k > 1) {
      EXPECT_GT(max_abs(backward.dk), 1e-3);
      EXPECT_GT(max_abs(backward.dv), 1e-3);
    }
  }
};

// Every algorithm of the API, the reference included.
inline constexpr Algorithm kAllAlgorithms[] = {Algorithm::reference, Algorithm::flash, Algorithm::small_cache,
                                               Algorithm::automatic};

// Options that run `algorithm` with an M of `cache_words` (several tiles for the small problems).
inline AttentionOptions options_for(Algorithm algorithm, int64_t cache_words = 4096) {
  AttentionOptions options;
  options.algorithm = algorithm;
  options.cache_words = cache_words;
  return options;
}

inline void expect_same_bits(const ApiProblem& a, const ApiProblem& b) {
  EXPECT_TRUE(same_bits(a.o, b.o));
  EXPECT_TRUE(same_bits(a.lse, b.lse));
  EXPECT_TRUE(same_bits(a.dq, b.dq));
  EXPECT_TRUE(same_bits(a.dk, b.dk));
  EXPECT_TRUE(same_bits(a.dv, b.dv));
}

}  // namespace spattn::testing
