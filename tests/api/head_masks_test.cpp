// One mask per query head through the public API: agreement with the fp64 reference's per-head
// masks, counted == predicted, one algorithm for all heads, identical bits for any thread count,
// the same result as one shared mask when every head gets the same one, and the checks.
#include "support/api_problem.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::testing::ApiProblem;

namespace {

std::vector<Mask> masks_of(const std::vector<std::string>& specs, int64_t n_q, int64_t n_k) {
  std::vector<Mask> masks;
  for (const std::string& spec : specs) masks.push_back(Mask::from_spec(spec, n_q, n_k));
  return masks;
}

const std::vector<std::string> kFourMasks = {"causal", "full", "sliding_window:w=4", "random:p=0.15,seed=9"};

}  // namespace

TEST(HeadMasks, EveryAlgorithmMatchesTheReferenceAndCountsWhatItPredicts) {
  for (const auto& [n_q, n_k] : {std::pair<int64_t, int64_t>{97, 97}, {7, 7}, {31, 45}, {1, 1}}) {
    const std::vector<Mask> masks = masks_of(kFourMasks, n_q, n_k);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
      SCOPED_TRACE(std::to_string(n_q) + " x " + std::to_string(n_k) + " " + spattn::algorithm_name(algorithm));
      ApiProblem p(2, 4, 2, n_q, n_k, 10);  // grouped-query heads too: masks belong to query heads
      AttentionOptions forward_options, backward_options;
      spattn::io::Ledger forward_ledger, backward_ledger;
      forward_options.algorithm = backward_options.algorithm = algorithm;
      forward_options.cache_words = backward_options.cache_words = algorithm == Algorithm::small_cache ? 150 : 900;
      forward_options.threads = backward_options.threads = 2;
      forward_options.ledger = &forward_ledger;
      backward_options.ledger = &backward_ledger;
      const auto [forward_plan, backward_plan] = p.run(masks, forward_options, backward_options);
      p.expect_matches_reference(masks);
      EXPECT_EQ(forward_ledger.reads(), forward_plan.reads);
      EXPECT_EQ(forward_ledger.writes(), forward_plan.writes);
      EXPECT_EQ(backward_ledger.reads(), backward_plan.reads);
      EXPECT_EQ(backward_ledger.writes(), backward_plan.writes);
      // The plan's per-head costs cover the four heads of one batch entry, the totals both entries.
      EXPECT_EQ(forward_plan.cost_heads, 4);
      EXPECT_EQ(forward_plan.num_heads, 8);
      const spattn::AlgorithmCost& chosen =
          forward_plan.algorithm == Algorithm::flash ? forward_plan.flash : forward_plan.small_cache;
      EXPECT_EQ(forward_plan.reads, 2 * chosen.reads);
      int64_t pairs = 0;
      for (const Mask& mask : masks) pairs += mask.nnz();
      EXPECT_EQ(forward_plan.z_qk, pairs);
      if (algorithm != Algorithm::automatic) {
        EXPECT_EQ(forward_plan.algorithm, algorithm);
      }
      EXPECT_NE(forward_plan.to_string().find("one per head"), std::string::npos);
    }
  }
}

// Over the heads' summed predictions: for words the fewer lines (then words), for time the
// smaller summed time price (the masks are not full).
TEST(HeadMasks, AutomaticPicksOneAlgorithmWithTheSmallerTotal) {
  const std::vector<Mask> masks = masks_of(kFourMasks, 64, 64);
  ApiProblem p(1, 4, 4, 64, 64, 16);
  for (const auto objective : {spattn::PlanObjective::words, spattn::PlanObjective::time}) {
    for (int64_t m : {int64_t{120}, int64_t{4000}}) {
      AttentionOptions options;
      options.cache_words = m;
      options.objective = objective;
      const auto [forward_plan, backward_plan] = p.run(masks, options);
      for (const spattn::Plan& plan : {forward_plan, backward_plan}) {
        ASSERT_TRUE(plan.masked);
        // Words: the fewer lines (both predict them), the words breaking a tie.
        const auto io = [](const spattn::AlgorithmCost& cost) { return std::make_pair(cost.total_lines(), cost.total()); };
        ASSERT_TRUE(plan.small_cache.lines_predicted);
        const bool flash_cheaper =
            plan.flash.feasible &&
            (objective == spattn::PlanObjective::time ? plan.flash.time_price <= plan.small_cache.time_price
                                                      : io(plan.flash) <= io(plan.small_cache));
        EXPECT_EQ(plan.algorithm, flash_cheaper ? Algorithm::flash : Algorithm::small_cache)
            << m << " " << spattn::plan_objective_name(objective);
      }
    }
  }
}

TEST(HeadMasks, EveryThreadCountGivesTheSameBits) {
  const std::vector<Mask> masks = masks_of(kFourMasks, 97, 97);
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = algorithm == Algorithm::small_cache ? 150 : 900;
    options.threads = 1;
    ApiProblem one(1, 4, 4, 97, 97, 9);
    one.run(masks, options);
    for (int threads : {2, 3}) {
      SCOPED_TRACE(std::string(spattn::algorithm_name(algorithm)) + " threads " + std::to_string(threads));
      ApiProblem many(1, 4, 4, 97, 97, 9);
      options.threads = threads;
      many.run(masks, options);
      spattn::testing::expect_same_bits(one, many);
    }
  }
}

TEST(HeadMasks, TheSameMaskForEveryHeadIsTheSharedMask) {
  const Mask window = Mask::from_spec("sliding_window:w=6", 40, 40);
  AttentionOptions options;
  options.cache_words = 600;
  spattn::io::Ledger shared_ledger, listed_ledger;
  ApiProblem shared(2, 3, 3, 40, 40, 8), listed(2, 3, 3, 40, 40, 8);
  options.ledger = &shared_ledger;
  const auto shared_plans = shared.run({window}, options);
  options.ledger = &listed_ledger;
  const auto listed_plans = listed.run({window, window, window}, options);
  spattn::testing::expect_same_bits(shared, listed);
  EXPECT_EQ(listed_plans.first.cost_heads, 1);  // one mask: an ordinary plan
  EXPECT_EQ(listed_plans.second.total(), shared_plans.second.total());
  EXPECT_EQ(listed_ledger.reads(), shared_ledger.reads());
}

TEST(HeadMasks, NoMaskRunsAndPreviewsWhatTheFullMaskDoes) {
  for (const auto& [n_q, n_k] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {13, 9}}) {
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
      SCOPED_TRACE(std::to_string(n_q) + " x " + std::to_string(n_k) + " " + spattn::algorithm_name(algorithm));
      ApiProblem none(2, 4, 2, n_q, n_k, 6), full(2, 4, 2, n_q, n_k, 6);
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = algorithm == Algorithm::small_cache ? 150 : 900;
      const auto none_plans = none.run_with({}, options, options);
      const auto full_plans = full.run_with(Mask::full(n_q, n_k), options, options);
      spattn::testing::expect_same_bits(none, full);
      none.expect_matches_reference({Mask::full(n_q, n_k)});
      EXPECT_TRUE(none_plans.first == full_plans.first);
      EXPECT_TRUE(none_plans.second == full_plans.second);
      const spattn::AttentionShape shape{2, 4, 2, n_q, n_k, 6, 6};
      EXPECT_TRUE(spattn::plan_attention(shape, {}, spattn::Pass::backward, options) == none_plans.second);
      EXPECT_FALSE(none_plans.second.masked);
    }
  }
}

TEST(HeadMasks, TheMaskListIsCheckedBeforeAnythingIsWritten) {
  ApiProblem p(1, 3, 3, 6, 7, 4);
  auto expect_error = [&](const std::vector<Mask>& masks, const std::string& fragment) {
    try {
      p.run(masks, AttentionOptions{});
      ADD_FAILURE() << "expected an error containing " << fragment;
    } catch (const spattn::InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_error({Mask::full(6, 7), Mask::full(6, 7)}, "attention_forward: masks has 2 masks, q has 3 heads");
  expect_error({Mask::full(6, 7), Mask::full(5, 7), Mask::full(6, 7)},
               "attention_forward: masks[1] is 5 x 7, but q has seqlen 6 and k has seqlen 7");
  expect_error({}, "attention_forward: masks has 0 masks, q has 3 heads");
}
