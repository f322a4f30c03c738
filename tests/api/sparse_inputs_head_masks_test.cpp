// One mask per query head with sparse inputs (sparse_inputs.hpp, the std::vector<Mask> overloads):
// 2 batch entries x 4 query heads over 2 kv heads (grouped-query), the heads masked causal,
// sliding_window:w=3, random and empty; CSR Q and K with dense V, and dense Q and K with CSR V;
// square and rectangular odd sizes. Checked: the fp64 reference with the same per-head masks,
// counted == predicted with each head priced from its own inputs and mask, one algorithm for all
// heads (auto: the fewer summed words), the bits of the densified inputs through attention.hpp's
// per-head masks, the same bits and words for 1 and 2 threads, the same mask for every head == the
// one-mask call, and bad mask counts or shapes named, with nothing written.
#include <spattn/attention.hpp>
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
#include <utility>
#include <vector>

namespace {

using namespace spattn;
using Outputs = spattn::testing::RunOutputs;
using spattn::testing::contains;
using spattn::testing::expect_counted_is_predicted;
using spattn::testing::expect_same_outputs;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::message_of;
using spattn::testing::sparse_input;
using spattn::testing::SparseInput;

constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2;
constexpr int64_t kD = 8, kE = 6;
constexpr float kSentinel = 7.0f;

// Which inputs are given as CSR (the others dense).
enum class Layout { csr_qk, csr_v, dense };

std::vector<Mask> four_masks(int64_t m, int64_t n) {
  return {Mask::from_spec("causal", m, n), Mask::from_spec("sliding_window:w=3", m, n),
          Mask::from_spec("random:p=0.3,seed=5", m, n),
          Mask::from_csr(sparse_formats::CsrPattern<int64_t>::empty(m, n))};
}

// Q of every (batch, query head), K and V of every (batch, kv head), each at its own density and
// seed (so every head moves its own words), kept both as CSR and as one contiguous dense tensor
// per operand (the densified inputs, for attention.hpp and the reference).
class Problem {
 public:
  Problem(int64_t m, int64_t n) : m_(m), n_(n) {
    const auto make = [](int64_t count, int64_t rows, int64_t cols, uint32_t seed, double density, int64_t empty_row,
                         std::vector<SparseInput>& parts, std::vector<float>& all) {
      for (int64_t i = 0; i < count; ++i) {
        parts.push_back(sparse_input(rows, cols, density + 0.08 * static_cast<double>(i),
                                     seed + static_cast<uint32_t>(i), empty_row < 0 ? -1 : i % rows, 2.0f));
        all.insert(all.end(), parts.back().dense.begin(), parts.back().dense.end());
      }
    };
    make(kBatch * kHeads, m, kD, 100, 0.2, 0, q_, q_all_);
    make(kBatch * kKvHeads, n, kD, 200, 0.3, -1, k_, k_all_);
    make(kBatch * kKvHeads, n, kE, 300, 0.4, -1, v_, v_all_);
    d_o_ = spattn::testing::random_floats(kBatch * kHeads * m * kE, 34);
  }

  MultiHeadInputs inputs(Layout layout) const {
    MultiHeadInputs in{kBatch, kHeads, kKvHeads};
    const auto add = [](bool csr, const std::vector<SparseInput>& parts, std::vector<AttentionInput>& to) {
      for (const SparseInput& x : parts) {
        to.push_back(csr ? AttentionInput::csr(x.csr.view())
                         : AttentionInput::dense(TensorView<const float>::matrix(x.dense.data(), x.csr.num_rows(),
                                                                                  x.csr.num_cols())));
      }
    };
    add(layout == Layout::csr_qk, q_, in.q);
    add(layout == Layout::csr_qk, k_, in.k);
    add(layout == Layout::csr_v, v_, in.v);
    return in;
  }

  // Forward then backward through the sparse-input API; `masks` is one Mask or a vector of them.
  // Every output starts as kSentinel.
  template <typename Masks>
  Outputs run(const MultiHeadInputs& in, const Masks& masks, AttentionOptions options) const {
    Outputs out = sentinel_outputs();
    options.ledger = &out.forward_ledger;
    out.forward_plan = attention_forward(in, per_query(out.o, kE), per_query(out.lse, 1), masks, options);
    options.ledger = &out.backward_ledger;
    out.backward_plan = attention_backward(in, per_query_const(out.o, kE), per_query_const(out.lse, 1),
                                           per_query_const(d_o_, kE), per_query(out.dq, kD), per_kv(out.dk, kD),
                                           per_kv(out.dv, kE), masks, options);
    return out;
  }

  // The densified inputs through attention.hpp's per-head masks.
  Outputs run_dense_api(const std::vector<Mask>& masks, AttentionOptions options) const {
    Outputs out = sentinel_outputs();
    const auto q = TensorView<const float>::contiguous(q_all_.data(), kBatch, kHeads, m_, kD);
    const auto k = TensorView<const float>::contiguous(k_all_.data(), kBatch, kKvHeads, n_, kD);
    const auto v = TensorView<const float>::contiguous(v_all_.data(), kBatch, kKvHeads, n_, kE);
    options.ledger = &out.forward_ledger;
    out.forward_plan = attention_forward(q, k, v, per_query(out.o, kE), per_query(out.lse, 1), masks, options);
    options.ledger = &out.backward_ledger;
    out.backward_plan = attention_backward(q, k, v, per_query_const(out.o, kE), per_query_const(out.lse, 1),
                                           per_query_const(d_o_, kE), per_query(out.dq, kD), per_kv(out.dk, kD),
                                           per_kv(out.dv, kE), masks, options);
    return out;
  }

  // The fp64 reference with one mask per query head (reference.hpp's grouped-query sums).
  std::pair<reference::ForwardResult, reference::BackwardResult> expected(const std::vector<Mask>& masks,
                                                                          double scale) const {
    const auto q = spattn::testing::widen(q_all_), k = spattn::testing::widen(k_all_),
               v = spattn::testing::widen(v_all_), d_o = spattn::testing::widen(d_o_);
    const auto qv = TensorView<const double>::contiguous(q.data(), kBatch, kHeads, m_, kD);
    const auto kv = TensorView<const double>::contiguous(k.data(), kBatch, kKvHeads, n_, kD);
    const auto vv = TensorView<const double>::contiguous(v.data(), kBatch, kKvHeads, n_, kE);
    const auto d_ov = TensorView<const double>::contiguous(d_o.data(), kBatch, kHeads, m_, kE);
    reference::MaskList<int64_t> patterns;
    for (const Mask& mask : masks) patterns.push_back(mask.csr());
    return {reference::forward<int64_t>(qv, kv, vv, patterns, scale),
            reference::backward<int64_t>(qv, kv, vv, d_ov, patterns, scale)};
  }

  int64_t m_, n_;

 private:
  Outputs sentinel_outputs() const {
    Outputs out;
    out.o.assign(static_cast<size_t>(kBatch * kHeads * m_ * kE), kSentinel);
    out.lse.assign(static_cast<size_t>(kBatch * kHeads * m_), kSentinel);
    out.dq.assign(static_cast<size_t>(kBatch * kHeads * m_ * kD), kSentinel);
    out.dk.assign(static_cast<size_t>(kBatch * kKvHeads * n_ * kD), kSentinel);
    out.dv.assign(static_cast<size_t>(kBatch * kKvHeads * n_ * kE), kSentinel);
    return out;
  }
  TensorView<float> per_query(std::vector<float>& x, int64_t width) const {
    return TensorView<float>::contiguous(x.data(), kBatch, kHeads, m_, width);
  }
  TensorView<const float> per_query_const(const std::vector<float>& x, int64_t width) const {
    return TensorView<const float>::contiguous(x.data(), kBatch, kHeads, m_, width);
  }
  TensorView<float> per_kv(std::vector<float>& x, int64_t width) const {
    return TensorView<float>::contiguous(x.data(), kBatch, kKvHeads, n_, width);
  }

  std::vector<SparseInput> q_, k_, v_;
  std::vector<float> q_all_, k_all_, v_all_, d_o_;
};

TEST(SparseInputsHeadMasks, EveryAlgorithmMatchesTheReferenceAndCountsWhatItPredicts) {
  constexpr int64_t kCache = 400;
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {7, 13}, {97, 61}}) {
    const Problem p(m, n);
    const std::vector<Mask> masks = four_masks(m, n);
    const auto want = p.expected(masks, 0.4);
    int64_t pairs = 0;
    for (const Mask& mask : masks) pairs += mask.nnz();
    for (const Layout layout : {Layout::csr_qk, Layout::csr_v}) {
      const MultiHeadInputs in = p.inputs(layout);
      for (const Algorithm algorithm :
           {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic, Algorithm::reference}) {
        SCOPED_TRACE(::testing::Message() << m << " x " << n << (layout == Layout::csr_qk ? " csr q, k" : " csr v")
                                          << " " << algorithm_name(algorithm));
        AttentionOptions options;
        options.scale = 0.4;
        options.threads = 1;
        options.cache_words = kCache;
        options.algorithm = algorithm;
        const Outputs got = p.run(in, masks, options);
        const int64_t fwd_terms = kD + n, bwd_terms = (kD + kE + 2 * n) * (kHeads / kKvHeads);
        EXPECT_GT(max_abs(want.first.o), 0.0);
        EXPECT_GT(max_abs(want.second.dv), 0.0);
        EXPECT_LE(max_abs_error(got.o, want.first.o), fp32_tolerance(fwd_terms, max_abs(want.first.o)));
        EXPECT_LE(max_abs_error(got.lse, want.first.lse), fp32_tolerance(fwd_terms, max_abs(want.first.lse)));
        EXPECT_LE(max_abs_error(got.dq, want.second.dq), fp32_tolerance(bwd_terms, max_abs(want.second.dq)));
        EXPECT_LE(max_abs_error(got.dk, want.second.dk), fp32_tolerance(bwd_terms, max_abs(want.second.dk)));
        EXPECT_LE(max_abs_error(got.dv, want.second.dv), fp32_tolerance(bwd_terms, max_abs(want.second.dv)));
        // Head 3's mask is empty: its rows attend nothing (lse -inf), unlike head 0's (causal: its
        // last row attends).
        EXPECT_EQ(got.lse[static_cast<size_t>(3 * m)], -INFINITY);
        EXPECT_TRUE(std::isfinite(got.lse[static_cast<size_t>(m - 1)]));

        const Plan& plan = got.forward_plan;
        EXPECT_EQ(plan.num_heads, kBatch * kHeads);
        EXPECT_EQ(plan.cost_heads, kBatch * kHeads);
        EXPECT_EQ(plan.z_qk, kBatch * pairs);
        EXPECT_TRUE(plan.sparse_inputs);
        EXPECT_TRUE(plan.head_masks);
        EXPECT_TRUE(contains(plan.to_string(), "masks (one per head)")) << plan.to_string();
        EXPECT_TRUE(contains(plan.flash.tiles, "each head mask has its own tiles")) << plan.flash.tiles;
        if (algorithm == Algorithm::reference) continue;
        expect_counted_is_predicted(got.forward_plan, got.forward_ledger);
        expect_counted_is_predicted(got.backward_plan, got.backward_ledger);
        EXPECT_GT(got.backward_plan.kv_sum_reads, 0);
        if (m == 97) {  // two workers: the same bits and words
          AttentionOptions two_threads = options;
          two_threads.threads = 2;
          const Outputs two = p.run(in, masks, two_threads);
          expect_same_outputs(got, two);
          EXPECT_EQ(two.backward_ledger.reads(), got.backward_ledger.reads());
          EXPECT_EQ(two.backward_ledger.writes(), got.backward_ledger.writes());
        }  // grouped-query dK, dV sums, counted and predicted
        // One algorithm for all heads, each head priced with its own inputs and its own mask.
        int64_t reads = 0, writes = 0, flash_flops = 0, small_cache_flops = 0;
        for (int64_t b = 0; b < kBatch; ++b) {
          for (int64_t h = 0; h < kHeads; ++h) {
            const Plan head = plan_attention(in.head(b, h), masks[static_cast<size_t>(h)], Pass::forward,
                                             spattn::testing::planning_options(kCache, plan.algorithm));
            reads += head.reads;
            writes += head.writes;
            flash_flops += head.flash.flops;
            small_cache_flops += head.small_cache.flops;
          }
        }
        EXPECT_EQ(plan.reads, reads);
        EXPECT_EQ(plan.writes, writes);
        EXPECT_EQ(plan.flash.flops, flash_flops);
        EXPECT_EQ(plan.small_cache.flops, small_cache_flops);
        if (algorithm == Algorithm::automatic) {
          // Each pass chooses once for all heads: the fewer lines summed over them, words breaking
          // a tie.
          const auto io = [](const spattn::AlgorithmCost& cost) {
            return std::make_pair(cost.total_lines(), cost.total());
          };
          for (const Plan* pass_plan : {&got.forward_plan, &got.backward_plan}) {
            ASSERT_TRUE(pass_plan->flash.feasible && pass_plan->small_cache.feasible);
            ASSERT_TRUE(pass_plan->flash.lines_predicted && pass_plan->small_cache.lines_predicted);
            EXPECT_EQ(pass_plan->algorithm,
                      io(pass_plan->flash) <= io(pass_plan->small_cache) ? Algorithm::flash : Algorithm::small_cache);
          }
          continue;
        }
        EXPECT_EQ(plan.algorithm, algorithm);
        // The densified inputs through attention.hpp's per-head masks, same algorithm, tiles for
        // words (as CSR calls plan): the same bits.
        options.objective = PlanObjective::words;
        expect_same_outputs(got, p.run_dense_api(masks, options));
      }
    }
  }
}

TEST(SparseInputsHeadMasks, DenseInputsPlanAndRunAsTheDenseApi) {
  const Problem p(97, 61);
  const std::vector<Mask> masks = four_masks(97, 61);
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = 600;
    options.threads = 2;
    options.objective = PlanObjective::words;
    const Outputs got = p.run(p.inputs(Layout::dense), masks, options);
    const Outputs dense = p.run_dense_api(masks, options);
    EXPECT_EQ(got.forward_plan.algorithm, dense.forward_plan.algorithm);
    EXPECT_EQ(got.forward_plan.total(), dense.forward_plan.total());
    EXPECT_EQ(got.backward_plan.total(), dense.backward_plan.total());
    EXPECT_EQ(got.backward_ledger.reads(), dense.backward_ledger.reads());
    EXPECT_EQ(got.backward_ledger.writes(), dense.backward_ledger.writes());
    expect_counted_is_predicted(got.backward_plan, got.backward_ledger);
    expect_same_outputs(got, dense);
  }
}

TEST(SparseInputsHeadMasks, TheSameMaskForEveryHeadIsTheOneMaskCall) {
  const Problem p(7, 13);
  const Mask causal = Mask::from_spec("causal", 7, 13);
  const std::vector<Mask> copies(kHeads, causal);
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
    SCOPED_TRACE(algorithm_name(algorithm));
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = 400;
    const Outputs per_head = p.run(p.inputs(Layout::csr_qk), copies, options);
    const Outputs shared = p.run(p.inputs(Layout::csr_qk), causal, options);
    expect_same_outputs(per_head, shared);
    EXPECT_EQ(per_head.backward_plan.algorithm, shared.backward_plan.algorithm);
    EXPECT_EQ(per_head.backward_plan.total(), shared.backward_plan.total());
    EXPECT_FALSE(per_head.backward_plan.head_masks);  // copies of one mask: one mask for all heads
    EXPECT_FALSE(shared.backward_plan.head_masks);
    EXPECT_EQ(per_head.backward_plan.flash.flops, shared.backward_plan.flash.flops);
    EXPECT_GT(shared.backward_plan.flash.flops, 0);
    EXPECT_EQ(per_head.backward_ledger.reads(), shared.backward_ledger.reads());
    EXPECT_EQ(per_head.backward_ledger.writes(), shared.backward_ledger.writes());
    EXPECT_EQ(per_head.forward_plan.flash.tiles, shared.forward_plan.flash.tiles);
    EXPECT_FALSE(contains(per_head.forward_plan.flash.tiles, "each head mask"));
  }
}

TEST(SparseInputsHeadMasks, BadMaskCountsAndShapesAreNamedAndWriteNothing) {
  const Problem p(7, 13);
  const MultiHeadInputs in = p.inputs(Layout::csr_qk);
  AttentionOptions options;
  options.cache_words = 400;
  // Forward: the outputs keep their sentinel.
  std::vector<float> o(static_cast<size_t>(kBatch * kHeads * 7 * kE), kSentinel),
      lse(static_cast<size_t>(kBatch * kHeads * 7), kSentinel);
  const auto o_view = TensorView<float>::contiguous(o.data(), kBatch, kHeads, 7, kE);
  const auto lse_view = TensorView<float>::contiguous(lse.data(), kBatch, kHeads, 7, 1);
  const auto forward = [&](const std::vector<Mask>& masks) {
    return message_of<InvalidArgument>([&] { attention_forward(in, o_view, lse_view, masks, options); });
  };
  std::vector<Mask> masks = four_masks(7, 13);
  masks.pop_back();
  EXPECT_TRUE(contains(forward(masks), "attention_forward (sparse inputs): masks has 3 masks, q has 4 heads "
                                       "(one mask per query head)"));
  EXPECT_TRUE(contains(forward({}), "masks has 0 masks, q has 4 heads"));
  masks = four_masks(7, 13);
  masks[2] = Mask::from_spec("causal", 7, 12);
  EXPECT_TRUE(contains(forward(masks), "attention_forward (sparse inputs): masks[2] is 7 x 12, but q has seqlen 7 "
                                       "and k has seqlen 13"));
  // The one-mask overload keeps its message.
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
                         attention_forward(in, o_view, lse_view, Mask::full(7, 12), options);
                       }),
                       "attention_forward (sparse inputs): mask is 7 x 12, but q has seqlen 7 and k has seqlen 13"));
  for (const float x : o) ASSERT_EQ(x, kSentinel);
  for (const float x : lse) ASSERT_EQ(x, kSentinel);

  // Backward: dq, dk, dv keep their sentinel.
  const Outputs valid = p.run(in, four_masks(7, 13), options);
  std::vector<float> dq(valid.dq.size(), kSentinel), dk(valid.dk.size(), kSentinel), dv(valid.dv.size(), kSentinel);
  const std::vector<float> d_o = spattn::testing::random_floats(kBatch * kHeads * 7 * kE, 5);
  const auto backward = [&](const std::vector<Mask>& bad) {
    return message_of<InvalidArgument>([&] {
      attention_backward(in, TensorView<const float>::contiguous(valid.o.data(), kBatch, kHeads, 7, kE),
                         TensorView<const float>::contiguous(valid.lse.data(), kBatch, kHeads, 7, 1),
                         TensorView<const float>::contiguous(d_o.data(), kBatch, kHeads, 7, kE),
                         TensorView<float>::contiguous(dq.data(), kBatch, kHeads, 7, kD),
                         TensorView<float>::contiguous(dk.data(), kBatch, kKvHeads, 13, kD),
                         TensorView<float>::contiguous(dv.data(), kBatch, kKvHeads, 13, kE), bad, options);
    });
  };
  masks = four_masks(7, 13);
  masks.push_back(masks.front());
  EXPECT_TRUE(contains(backward(masks), "attention_backward (sparse inputs): masks has 5 masks, q has 4 heads"));
  masks = four_masks(7, 13);
  masks[3] = Mask::full(8, 13);
  EXPECT_TRUE(contains(backward(masks), "masks[3] is 8 x 13, but q has seqlen 7 and k has seqlen 13"));
  for (const std::vector<float>* grad : {&dq, &dk, &dv}) {
    for (const float x : *grad) ASSERT_EQ(x, kSentinel);
  }

  // The plan checks the same.
  masks = four_masks(7, 13);
  masks.pop_back();
  EXPECT_TRUE(contains(message_of<InvalidArgument>(
                           [&] { plan_attention(in, masks, Pass::forward, spattn::testing::planning_options(400)); }),
                       "plan_attention (sparse inputs): masks has 3 masks, q has 4 heads"));
}

}  // namespace
