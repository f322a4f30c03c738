// The public sparse-input entry points over many heads (sparse_inputs.hpp, MultiHeadInputs): 2
// batch entries x 3 heads, multi-head and grouped-query, each head with its own nonzeros (and one
// dense V), against the fp64 reference head by head, counted == predicted, the same bits for 1 and
// 2 threads, and bad counts or shapes named by index. One head: sparse_inputs_api_test.cpp.
#include <spattn/attention.hpp>
#include <spattn/bounds.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>

#include "support/compare.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/sparse_inputs_runs.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace spattn;
using spattn::testing::contains;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::message_of;
using spattn::testing::SparseInput;
using spattn::testing::expect_counted_with_input_indices;
using spattn::testing::expect_same_outputs;
using spattn::testing::sparse_input;

using Outputs = spattn::testing::RunOutputs;

struct Outputs64 {
  std::vector<double> o, lse, dq, dk, dv;
};

constexpr int64_t kBatch = 2, kHeads = 3;

// Q of every (batch, head), K and V of every (batch, kv head), each at its own density (so every
// head moves its own words); V of kv head (0, 0) is given dense.
class HeadsProblem {
 public:
  HeadsProblem(int64_t kv_heads, int64_t n, int64_t d, int64_t e) : kv_heads_(kv_heads), n_(n), d_(d), e_(e) {
    for (int64_t i = 0; i < kBatch * kHeads; ++i) {
      q_.push_back(sparse_input(n, d, 0.2 + 0.1 * static_cast<double>(i), 100 + static_cast<uint32_t>(i), i % n, 2.0f));
    }
    for (int64_t i = 0; i < kBatch * kv_heads; ++i) {
      k_.push_back(sparse_input(n, d, 0.5 - 0.05 * static_cast<double>(i), 200 + static_cast<uint32_t>(i)));
      v_.push_back(sparse_input(n, e, 0.3 + 0.1 * static_cast<double>(i), 300 + static_cast<uint32_t>(i)));
    }
    d_o_ = spattn::testing::random_floats(kBatch * kHeads * n * e, 34);
  }

  MultiHeadInputs inputs() const {
    MultiHeadInputs in{kBatch, kHeads, kv_heads_};
    for (const auto& x : q_) in.q.push_back(AttentionInput::csr(x.csr.view()));
    for (const auto& x : k_) in.k.push_back(AttentionInput::csr(x.csr.view()));
    for (const auto& x : v_) in.v.push_back(AttentionInput::csr(x.csr.view()));
    in.v[0] = AttentionInput::dense(TensorView<const float>::matrix(v_[0].dense.data(), n_, e_));
    return in;
  }

  Outputs run(const MultiHeadInputs& in, const Mask& mask, AttentionOptions options) const {
    Outputs out;
    const int64_t qh = kBatch * kHeads, kh = kBatch * kv_heads_;
    out.o.assign(static_cast<size_t>(qh * n_ * e_), 7.0f);
    out.lse.assign(static_cast<size_t>(qh * n_), 7.0f);
    out.dq.assign(static_cast<size_t>(qh * n_ * d_), 7.0f);
    out.dk.assign(static_cast<size_t>(kh * n_ * d_), 7.0f);
    out.dv.assign(static_cast<size_t>(kh * n_ * e_), 7.0f);
    const auto per_query = [&](std::vector<float>& x, int64_t w) {
      return TensorView<float>::contiguous(x.data(), kBatch, kHeads, n_, w);
    };
    options.ledger = &out.forward_ledger;
    out.forward_plan = attention_forward(in, per_query(out.o, e_), per_query(out.lse, 1), mask, options);
    options.ledger = &out.backward_ledger;
    out.backward_plan = attention_backward(
        in, per_query(out.o, e_), per_query(out.lse, 1),
        TensorView<const float>::contiguous(d_o_.data(), kBatch, kHeads, n_, e_), per_query(out.dq, d_),
        TensorView<float>::contiguous(out.dk.data(), kBatch, kv_heads_, n_, d_),
        TensorView<float>::contiguous(out.dv.data(), kBatch, kv_heads_, n_, e_), mask, options);
    return out;
  }

  // The fp64 reference head by head on the densified inputs, laid out like run()'s outputs; dK and
  // dV summed over each kv head's query heads.
  Outputs64 expected(const Mask& mask, double scale) const {
    Outputs64 want;
    const int64_t group = kHeads / kv_heads_;
    want.dk.assign(static_cast<size_t>(kBatch * kv_heads_ * n_ * d_), 0.0);
    want.dv.assign(static_cast<size_t>(kBatch * kv_heads_ * n_ * e_), 0.0);
    const auto dbl = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    for (int64_t b = 0; b < kBatch; ++b) {
      for (int64_t h = 0; h < kHeads; ++h) {
        const int64_t kv = b * kv_heads_ + h / group, qi = b * kHeads + h;
        const auto q = dbl(q_[static_cast<size_t>(qi)].dense), k = dbl(k_[static_cast<size_t>(kv)].dense),
                   v = dbl(v_[static_cast<size_t>(kv)].dense);
        const std::vector<double> d_o(d_o_.begin() + qi * n_ * e_, d_o_.begin() + (qi + 1) * n_ * e_);
        const auto qv = TensorView<const double>::matrix(q.data(), n_, d_);
        const auto kv_view = TensorView<const double>::matrix(k.data(), n_, d_);
        const auto vv = TensorView<const double>::matrix(v.data(), n_, e_);
        const auto fwd = reference::forward<int64_t>(qv, kv_view, vv, {mask.csr()}, scale);
        const auto bwd = reference::backward<int64_t>(qv, kv_view, vv, TensorView<const double>::matrix(d_o.data(), n_, e_),
                                                      {mask.csr()}, scale);
        want.o.insert(want.o.end(), fwd.o.begin(), fwd.o.end());
        want.lse.insert(want.lse.end(), fwd.lse.begin(), fwd.lse.end());
        want.dq.insert(want.dq.end(), bwd.dq.begin(), bwd.dq.end());
        for (size_t i = 0; i < bwd.dk.size(); ++i) want.dk[static_cast<size_t>(kv) * bwd.dk.size() + i] += bwd.dk[i];
        for (size_t i = 0; i < bwd.dv.size(); ++i) want.dv[static_cast<size_t>(kv) * bwd.dv.size() + i] += bwd.dv[i];
      }
    }
    return want;
  }

  int64_t kv_heads_, n_, d_, e_;

 private:
  std::vector<SparseInput> q_, k_, v_;
  std::vector<float> d_o_;
};

TEST(SparseInputsApiHeads, EveryHeadAgreesWithTheReferenceAndThePlanCountsExactly) {
  for (const int64_t kv_heads : {kHeads, int64_t{1}}) {
    for (const int64_t n : {7, 97}) {
      const HeadsProblem p(kv_heads, n, 8, 6);
      const Mask mask = Mask::from_spec("causal", n, n);
      const auto want = p.expected(mask, 0.4);
      for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic, Algorithm::reference}) {
        SCOPED_TRACE(::testing::Message() << "kv_heads " << kv_heads << " n " << n << " " << algorithm_name(algorithm));
        AttentionOptions options;
        options.scale = 0.4;
        options.threads = 1;
        options.cache_words = 400;
        options.algorithm = algorithm;
        const Outputs got = p.run(p.inputs(), mask, options);
        const int64_t fwd_terms = p.d_ + n, bwd_terms = (p.d_ + p.e_ + 2 * n) * kHeads;
        EXPECT_GT(max_abs(want.o), 0.0);
        EXPECT_GT(max_abs(want.dk), 0.0);
        EXPECT_LE(max_abs_error(got.o, want.o), fp32_tolerance(fwd_terms, max_abs(want.o)));
        EXPECT_LE(max_abs_error(got.lse, want.lse), fp32_tolerance(fwd_terms, max_abs(want.lse)));
        EXPECT_LE(max_abs_error(got.dq, want.dq), fp32_tolerance(bwd_terms, max_abs(want.dq)));
        EXPECT_LE(max_abs_error(got.dk, want.dk), fp32_tolerance(bwd_terms, max_abs(want.dk)));
        EXPECT_LE(max_abs_error(got.dv, want.dv), fp32_tolerance(bwd_terms, max_abs(want.dv)));
        const Plan& plan = got.forward_plan;
        EXPECT_EQ(plan.num_heads, kBatch * kHeads);
        EXPECT_EQ(plan.cost_heads, kBatch * kHeads);
        EXPECT_EQ(plan.z_qk, mask.nnz() * kBatch * kHeads);
        EXPECT_TRUE(plan.sparse_inputs);
        if (algorithm == Algorithm::reference) continue;
        expect_counted_with_input_indices(got.forward_plan, got.forward_ledger);
        expect_counted_with_input_indices(got.backward_plan, got.backward_ledger);
        // The grouped-query sums are counted and predicted (none for multi-head attention).
        EXPECT_EQ(got.backward_plan.kv_sum_reads > 0, kv_heads < kHeads);
        // Each head's own words: the plan is the sum of the one-head plans (same algorithm).
        const MultiHeadInputs in = p.inputs();
        int64_t reads = 0;
        for (int64_t b = 0; b < kBatch; ++b) {
          for (int64_t h = 0; h < kHeads; ++h) {
            reads += plan_attention(in.head(b, h), mask, Pass::forward,
                                    spattn::testing::planning_options(400, plan.algorithm))
                         .reads;
          }
        }
        EXPECT_EQ(plan.reads, reads);
        const Plan first =
            plan_attention(in.head(0, 0), mask, Pass::forward, spattn::testing::planning_options(400, plan.algorithm));
        EXPECT_NE(first.reads * kBatch * kHeads, plan.reads);  // the heads' nonzeros differ
        EXPECT_TRUE(contains(plan.to_string(), "summed over 6 heads")) << plan.to_string();
        EXPECT_FALSE(contains(plan.to_string(), "one per head")) << plan.to_string();
      }
    }
  }
}

TEST(SparseInputsApiHeads, OneAndTwoThreadsGiveTheSameBits) {
  const HeadsProblem p(1, 97, 8, 6);
  const Mask mask = Mask::from_spec("random:p=0.3,seed=2", 97, 97);
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = 600;
    options.threads = 1;
    const Outputs one = p.run(p.inputs(), mask, options);
    options.threads = 2;
    const Outputs two = p.run(p.inputs(), mask, options);
    expect_same_outputs(one, two);
    EXPECT_EQ(one.backward_ledger.reads(), two.backward_ledger.reads());
    EXPECT_EQ(two.backward_ledger.reads(), two.backward_plan.reads);
  }
}

TEST(SparseInputsApiHeads, BadCountsAndShapesAreClearErrors) {
  const HeadsProblem p(1, 7, 4, 4);
  const Mask mask = Mask::full(7, 7);
  std::vector<float> o(kBatch * kHeads * 7 * 4), lse(kBatch * kHeads * 7);
  const auto forward = [&](const MultiHeadInputs& in) {
    return message_of<InvalidArgument>([&] {
      attention_forward(in, TensorView<float>::contiguous(o.data(), kBatch, kHeads, 7, 4),
                        TensorView<float>::contiguous(lse.data(), kBatch, kHeads, 7, 1), mask, AttentionOptions{});
    });
  };
  MultiHeadInputs in = p.inputs();
  in.q.pop_back();
  EXPECT_TRUE(contains(forward(in), "q has 5 inputs, expected batch x heads = 2 x 3 = 6"));
  in = p.inputs();
  in.k.push_back(in.k.front());
  EXPECT_TRUE(contains(forward(in), "k has 3 inputs, expected batch x kv_heads = 2 x 1 = 2"));
  in = p.inputs();
  in.kv_heads = 2;
  EXPECT_TRUE(contains(forward(in), "heads 3, kv_heads 2: each must be at least 1 and kv_heads must divide heads"));
  in = p.inputs();
  const SparseInput wide = sparse_input(7, 5, 0.5, 9);
  in.q[4] = AttentionInput::csr(wide.csr.view());
  EXPECT_TRUE(contains(forward(in), "q[4] (batch 1, head 1) is 7 x 5, q[0] is 7 x 4 (every head has the same shape)"));
  in = p.inputs();
  std::vector<int64_t> ptr{0, 2, 2, 2, 2, 2, 2, 2}, unsorted{3, 1};
  std::vector<float> values{1.0f, 2.0f};
  in.v[1] = AttentionInput::csr({{7, 4, ptr.data(), unsorted.data()}, values.data()});
  EXPECT_TRUE(contains(forward(in), "v[1] (batch 1, head 0)"));
  // Outputs: o per query head, dk per kv head.
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
                         attention_forward(p.inputs(), TensorView<float>::contiguous(o.data(), kBatch, 1, 7, 4),
                                           TensorView<float>::contiguous(lse.data(), kBatch, kHeads, 7, 1), mask,
                                           AttentionOptions{});
                       }),
                       "o has batch 2 and heads 1, expected 2 and 3"));
  std::vector<float> dq(o.size()), dk(o.size()), dv(o.size());
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
                         attention_backward(p.inputs(), TensorView<const float>::contiguous(o.data(), kBatch, kHeads, 7, 4),
                                            TensorView<const float>::contiguous(lse.data(), kBatch, kHeads, 7, 1),
                                            TensorView<const float>::contiguous(o.data(), kBatch, kHeads, 7, 4),
                                            TensorView<float>::contiguous(dq.data(), kBatch, kHeads, 7, 4),
                                            TensorView<float>::contiguous(dk.data(), kBatch, kHeads, 7, 4),
                                            TensorView<float>::contiguous(dv.data(), kBatch, 1, 7, 4), mask,
                                            AttentionOptions{});
                       }),
                       "dk has batch 2 and heads 3, expected 2 and 1"));
}

}  // namespace
