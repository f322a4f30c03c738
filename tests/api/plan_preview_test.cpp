// The plan a user previews is the plan that runs: plan_attention (spattn/attention.hpp for dense
// inputs, spattn/sparse_inputs.hpp for CSR inputs) returns a Plan equal (operator==: every figure,
// the groups of heads, the algorithm, the typed tiles and the prepared mask structures) to the one
// the call returns, over algorithms, objectives, masks, grouped-query heads, per-head masks and
// CSR inputs; and the words the run counts are the preview's.
#include <spattn/attention.hpp>
#include <spattn/sparse_inputs.hpp>

#include "plan/planned_run.hpp"
#include "support/api_problem.hpp"
#include "support/sparse_inputs_fixtures.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::AttentionShape;
using spattn::Mask;
using spattn::Pass;
using spattn::Plan;
using spattn::PlanObjective;

// 2 batch entries, 4 query heads over 2 kv heads, seqlen 37 x 29, head_dim 8.
constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kSeqQ = 37, kSeqK = 29, kDim = 8;

AttentionShape call_shape() { return {kBatch, kHeads, kKvHeads, kSeqQ, kSeqK, kDim, kDim}; }

struct MaskCase {
  std::string name;
  std::vector<Mask> masks;  // one for all heads, or one per query head
};

std::vector<MaskCase> mask_cases() {
  const Mask causal = Mask::from_spec("causal", kSeqQ, kSeqK);
  const Mask window = Mask::from_spec("sliding_window:w=5", kSeqQ, kSeqK);
  const Mask random = Mask::from_spec("random:p=0.3,seed=3", kSeqQ, kSeqK);
  return {{"full", {Mask::full(kSeqQ, kSeqK)}},
          {"causal", {causal}},
          {"window", {window}},
          {"random", {random}},
          {"per-head", {causal, window, causal, random}}};
}

Plan preview(const MaskCase& mask_case, Pass pass, const AttentionOptions& options) {
  if (mask_case.masks.size() == 1) return spattn::plan_attention(call_shape(), mask_case.masks.front(), pass, options);
  return spattn::plan_attention(call_shape(), mask_case.masks, pass, options);
}

TEST(PlanPreview, DenseInputsPreviewEqualsTheRunOverAlgorithmsObjectivesMasksAndGroupedQueryHeads) {
  spattn::testing::ApiProblem problem(kBatch, kHeads, kKvHeads, kSeqQ, kSeqK, kDim);
  int compared = 0;
  for (const MaskCase& mask_case : mask_cases()) {
    for (const Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache}) {
      for (const PlanObjective objective : {PlanObjective::time, PlanObjective::words}) {
        for (const int64_t cache_words : {int64_t{300}, int64_t{4096}}) {
          AttentionOptions options;
          options.algorithm = algorithm;
          options.objective = objective;
          options.cache_words = cache_words;
          options.threads = 2;
          const Plan forward_preview = preview(mask_case, Pass::forward, options);
          const Plan backward_preview = preview(mask_case, Pass::backward, options);
          spattn::io::Ledger forward_ledger, backward_ledger;
          AttentionOptions forward_options = options, backward_options = options;
          forward_options.ledger = &forward_ledger;
          backward_options.ledger = &backward_ledger;
          const auto [forward, backward] = problem.run(mask_case.masks, forward_options, backward_options);
          const std::string where = mask_case.name + " " + spattn::algorithm_name(algorithm) + " " +
                                    spattn::plan_objective_name(objective) + " M " + std::to_string(cache_words);
          EXPECT_TRUE(forward_preview == forward) << where << "\npreview:\n"
                                                  << forward_preview.to_string() << "run:\n" << forward.to_string();
          EXPECT_TRUE(backward_preview == backward) << where << "\npreview:\n"
                                                    << backward_preview.to_string() << "run:\n"
                                                    << backward.to_string();
          // The preview is what the run counts, grouped-query sums included.
          EXPECT_EQ(forward_ledger.reads(), forward_preview.reads) << where;
          EXPECT_EQ(forward_ledger.writes(), forward_preview.writes) << where;
          EXPECT_EQ(backward_ledger.reads(), backward_preview.reads) << where;
          EXPECT_EQ(backward_ledger.writes(), backward_preview.writes) << where;
          EXPECT_GT(backward_preview.kv_sum_reads, 0) << where;
          ASSERT_TRUE(forward_preview.run) << where;
          EXPECT_EQ(forward_preview.run->groups.size() == 1, mask_case.masks.size() == 1) << where;
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 5 * 3 * 2 * 2);
}

// Equality is not vacuous: a preview with another M, objective or algorithm is a different plan.
TEST(PlanPreview, EqualityTellsPlansThatWouldRunDifferentlyApart) {
  const Mask window = Mask::from_spec("sliding_window:w=5", kSeqQ, kSeqK);
  AttentionOptions options;
  options.cache_words = 4096;
  const Plan plan = spattn::plan_attention(call_shape(), window, Pass::backward, options);
  EXPECT_TRUE(plan == spattn::plan_attention(call_shape(), window, Pass::backward, options));

  AttentionOptions other_m = options;
  other_m.cache_words = 2048;
  EXPECT_FALSE(plan == spattn::plan_attention(call_shape(), window, Pass::backward, other_m));
  AttentionOptions flash = options;
  flash.algorithm = plan.algorithm == Algorithm::flash ? Algorithm::small_cache : Algorithm::flash;
  EXPECT_FALSE(plan == spattn::plan_attention(call_shape(), window, Pass::backward, flash));
  // Another mask with the same pattern prepares its own structures: another plan.
  const Mask same_pattern = Mask::from_spec("sliding_window:w=5", kSeqQ, kSeqK);
  EXPECT_FALSE(plan == spattn::plan_attention(call_shape(), same_pattern, Pass::backward, options));
  EXPECT_FALSE(plan == spattn::plan_attention(call_shape(), window, Pass::forward, options));
}

// The grouped-query sums' tiles are the plan's (the runner takes them from it): as wide as half of
// M allows, then as many rows; none for the forward or for multi-head attention.
TEST(PlanPreview, GroupedQuerySumTilesAreInThePlan) {
  AttentionOptions options;
  options.cache_words = 300;  // 150 columns fit: whole rows of 8, 18 of them
  const Plan backward = spattn::plan_attention(call_shape(), {}, Pass::backward, options);
  ASSERT_TRUE(backward.run);
  EXPECT_EQ(backward.run->dk_sum.cols, kDim);
  EXPECT_EQ(backward.run->dk_sum.rows, 18);
  EXPECT_EQ(backward.run->dv_sum, backward.run->dk_sum);
  AttentionShape wide_v = call_shape();
  wide_v.head_dim_v = 200;  // wider than M / 2: a tile of 150 columns, one row
  const Plan wide = spattn::plan_attention(wide_v, {}, Pass::backward, options);
  EXPECT_EQ(wide.run->dv_sum.cols, 150);
  EXPECT_EQ(wide.run->dv_sum.rows, 1);
  EXPECT_EQ(wide.run->dk_sum.cols, kDim);

  const Plan forward = spattn::plan_attention(call_shape(), {}, Pass::forward, options);
  EXPECT_EQ(forward.run->dk_sum.rows, 0);
  AttentionShape multi_head = call_shape();
  multi_head.kv_heads = kHeads;
  EXPECT_EQ(spattn::plan_attention(multi_head, {}, Pass::backward, options).run->dk_sum.rows, 0);
  // Another M, another tile, another plan.
  AttentionOptions larger = options;
  larger.cache_words = 310;
  const Plan other = spattn::plan_attention(call_shape(), {}, Pass::backward, larger);
  EXPECT_EQ(other.run->dk_sum.rows, 19);
}

// The API's defaults are the preview's: an options struct left as it is plans for time, and the
// legacy one-mask plan_attention plans for time too.
TEST(PlanPreview, DefaultsAreTheRunsDefaults) {
  const Mask window = Mask::from_spec("sliding_window:w=5", kSeqQ, kSeqK);
  AttentionOptions options;
  options.cache_words = 4096;
  const Plan plan = spattn::plan_attention(call_shape(), window, Pass::forward, options);
  EXPECT_EQ(plan.objective, PlanObjective::time);
  const Plan one_mask = spattn::plan_heads(spattn::bounds::DenseShape{kSeqQ, kSeqK, kDim, kDim}, window, Pass::forward,
      {4096});
  EXPECT_EQ(one_mask.objective, PlanObjective::time);
  EXPECT_EQ(one_mask.algorithm, plan.algorithm);
  EXPECT_EQ(one_mask.flash.tiles, plan.flash.tiles);
}

TEST(PlanPreview, ShapeErrorsNameTheArgument) {
  AttentionOptions options;
  AttentionShape shape = call_shape();
  shape.kv_heads = 3;
  EXPECT_THROW(
      {
        try {
          spattn::plan_attention(shape, {}, Pass::forward, options);
        } catch (const spattn::InvalidArgument& error) {
          EXPECT_NE(std::string(error.what()).find("not a multiple of k's 3 heads"), std::string::npos) << error.what();
          throw;
        }
      },
      spattn::InvalidArgument);
  shape = call_shape();
  shape.seqlen_q = -1;
  EXPECT_THROW(spattn::plan_attention(shape, {}, Pass::forward, options), spattn::InvalidArgument);
  const Mask wrong = Mask::from_spec("causal", kSeqQ + 1, kSeqK);
  EXPECT_THROW(spattn::plan_attention(call_shape(), wrong, Pass::forward, options), spattn::InvalidArgument);
  EXPECT_THROW(spattn::plan_attention(call_shape(), std::vector<Mask>{wrong}, Pass::forward, options),
               spattn::InvalidArgument);
}

// CSR inputs: each head's own nonzeros, one mask or one per head, grouped-query heads.
TEST(PlanPreview, CsrInputsPreviewEqualsTheRun) {
  using spattn::testing::sparse_input;
  constexpr int64_t batch = 1, heads = 2, kv_heads = 1, n = 23, d = 6;
  std::vector<spattn::testing::SparseInput> qs, ks, vs;
  spattn::MultiHeadInputs inputs{batch, heads, kv_heads};
  for (int64_t h = 0; h < heads; ++h) qs.push_back(sparse_input(n, d, 0.5, static_cast<uint32_t>(10 + h), 3));
  ks.push_back(sparse_input(n, d, 0.6, 20));
  vs.push_back(sparse_input(n, d, 0.7, 30));
  for (auto& q : qs) inputs.q.push_back(spattn::AttentionInput::csr(q.csr.view()));
  inputs.k.push_back(spattn::AttentionInput::csr(ks.front().csr.view()));
  inputs.v.push_back(spattn::AttentionInput::dense(
      spattn::TensorView<const float>::contiguous(vs.front().dense.data(), 1, 1, n, d)));
  const Mask causal = Mask::from_spec("causal", n, n);
  const Mask window = Mask::from_spec("sliding_window:w=3", n, n);
  std::vector<float> o(batch * heads * n * d), lse(batch * heads * n), d_o = spattn::testing::random_floats(o.size(), 5);
  std::vector<float> dq(o.size()), dk(batch * kv_heads * n * d), dv(dk.size());
  const auto view = [](std::vector<float>& x, int64_t h, int64_t last) {
    return spattn::TensorView<float>::contiguous(x.data(), 1, h, n, last);
  };
  const auto cview = [](const std::vector<float>& x, int64_t h, int64_t last) {
    return spattn::TensorView<const float>::contiguous(x.data(), 1, h, n, last);
  };
  // M = 0 is the run's default M, and a ledger of lines of 1 sets the plan's lines, in the preview
  // as in the run.
  spattn::io::Ledger word_ledger(1);
  for (const Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache}) {
    for (const int64_t cache_words : {int64_t{0}, int64_t{200}, int64_t{2048}}) {
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = cache_words;
      if (cache_words == 200) options.ledger = &word_ledger;
      const std::string where = std::string(spattn::algorithm_name(algorithm)) + " M " + std::to_string(cache_words);
      // One mask for both heads.
      const Plan forward = spattn::attention_forward(inputs, view(o, heads, d), view(lse, heads, 1), causal, options);
      EXPECT_TRUE(forward == spattn::plan_attention(inputs, causal, Pass::forward, options)) << where;
      const Plan backward = spattn::attention_backward(inputs, cview(o, heads, d), cview(lse, heads, 1),
                                                       cview(d_o, heads, d), view(dq, heads, d),
                                                       view(dk, kv_heads, d), view(dv, kv_heads, d), causal, options);
      const Plan backward_preview = spattn::plan_attention(inputs, causal, Pass::backward, options);
      EXPECT_TRUE(backward == backward_preview) << where << "\npreview:\n"
                                                << backward_preview.to_string() << "run:\n" << backward.to_string();
      EXPECT_GT(backward_preview.kv_sum_reads, 0) << where;
      // One mask per head.
      const std::vector<Mask> per_head{causal, window};
      const Plan per_head_run =
          spattn::attention_forward(inputs, view(o, heads, d), view(lse, heads, 1), per_head, options);
      EXPECT_TRUE(per_head_run == spattn::plan_attention(inputs, per_head, Pass::forward, options)) << where;
      EXPECT_EQ(per_head_run.run->groups.size(), 2u) << where;
      EXPECT_EQ(forward.cache_words, cache_words == 0 ? spattn::default_cache_words() : cache_words) << where;
      EXPECT_EQ(forward.line_words, cache_words == 200 ? 1 : 16) << where;
    }
  }
}

}  // namespace
