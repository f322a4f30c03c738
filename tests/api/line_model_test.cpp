// The line size L as a parameter of the whole I/O model (AttentionOptions::line_words): every
// schedule's plan, made for lines of L words, is what a ledger of L counts, through the API, at
// L = 1 (the paper's word model), 2, 8, 16 and 32; the preview equals the call; a bad L or a
// ledger of another L is refused before anything runs; and in the word model the switch falls
// where the paper puts it.
#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/io.hpp>
#include <spattn/plan.hpp>
#include <spattn/sparse_inputs.hpp>

#include "support/api_problem.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/sparse_inputs_runs.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace spattn {
namespace {

using testing::ApiProblem;
using testing::dense_plan;

constexpr int64_t kLineSizes[] = {1, 2, 8, 16, 32};

template <typename Call>
void expect_invalid_argument(Call&& call, const std::string& fragment) {
  try {
    call();
    ADD_FAILURE() << "expected an error containing " << fragment;
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

// Forward and backward of `mask` with `algorithm` at M, counted by ledgers of L: each ledger
// holds exactly its plan's words, index words and lines, and the results are the reference's.
void expect_counted_is_planned(const Mask& mask, int64_t d, int64_t cache_words, Algorithm algorithm,
                               int64_t line_words) {
  SCOPED_TRACE(std::string(algorithm_name(algorithm)) + ", M " + std::to_string(cache_words) + ", L " +
               std::to_string(line_words));
  ApiProblem problem(1, 1, 1, mask.seqlen_q(), mask.seqlen_k(), d);
  io::Ledger forward_ledger(line_words), backward_ledger(line_words);
  AttentionOptions forward_options = testing::options_for(algorithm, cache_words);
  forward_options.objective = PlanObjective::words;
  AttentionOptions backward_options = forward_options;
  forward_options.ledger = &forward_ledger;  // line_words 0: the ledger's
  backward_options.ledger = &backward_ledger;
  backward_options.line_words = line_words;  // given: the same
  const auto [forward, backward] = problem.run({mask}, forward_options, backward_options);
  for (const auto* pair : {&forward, &backward}) {
    EXPECT_EQ(pair->line_words, line_words);
    ASSERT_TRUE(pair->lines_predicted);
    if (line_words == 1) {  // one count: a line is a word
      EXPECT_EQ(pair->read_lines, pair->reads);
      EXPECT_EQ(pair->write_lines, pair->writes);
    }
  }
  testing::expect_counted_is_predicted(forward, forward_ledger);
  testing::expect_counted_is_predicted(backward, backward_ledger);
  EXPECT_GT(forward_ledger.total_lines().reads, 0);
  // The preview of the same call is the plan that ran.
  AttentionShape shape{1, 1, 1, mask.seqlen_q(), mask.seqlen_k(), d, d};
  AttentionOptions preview = backward_options;
  preview.ledger = nullptr;
  EXPECT_TRUE(plan_attention(shape, mask, Pass::backward, preview) == backward);
  problem.expect_matches_reference({mask});
}

TEST(LineModel, EveryScheduleCountsWhatItsPlanPredictsAtEveryLineSize) {
  const int64_t n = 97, d = 8;
  for (const std::string spec : {"full", "causal", "sliding_window:w=9", "random:p=0.2,seed=3", "documents:num_docs=3"}) {
    SCOPED_TRACE(spec);
    const Mask mask = Mask::from_spec(spec, n, n);
    for (const int64_t line_words : kLineSizes) {
      // M from 2 L^2 (the line model's domain) up; small enough for several tiles.
      for (const int64_t m : {std::max<int64_t>(300, 2 * line_words * line_words), int64_t{3000}}) {
        for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
          expect_counted_is_planned(mask, d, m, algorithm, line_words);
        }
      }
    }
  }
}

TEST(LineModel, SparseInputsCountWhatTheirPlanPredictsAtEveryLineSize) {
  const int64_t n = 57, d = 16;
  const testing::SparseInput q = testing::sparse_input(n, d, 0.3, 5), k = testing::sparse_input(n, d, 0.4, 6);
  const std::vector<float> v = testing::random_floats(n * d, 7);
  const AttentionInputs inputs{AttentionInput::csr(q.csr.view()), AttentionInput::csr(k.csr.view()),
                               AttentionInput::dense(TensorView<const float>::matrix(v.data(), n, d))};
  const Mask mask = Mask::from_spec("causal", n, n);
  for (const int64_t line_words : kLineSizes) {
    for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
      SCOPED_TRACE(std::string(algorithm_name(algorithm)) + ", L " + std::to_string(line_words));
      std::vector<float> o(static_cast<size_t>(n * d)), lse(static_cast<size_t>(n));
      io::Ledger ledger(line_words);
      AttentionOptions options = testing::options_for(algorithm, 2000);
      options.ledger = &ledger;
      const Plan plan = attention_forward(inputs, TensorView<float>::matrix(o.data(), n, d),
                                          TensorView<float>::matrix(lse.data(), n, 1), mask, options);
      EXPECT_EQ(plan.line_words, line_words);
      testing::expect_counted_with_input_indices(plan, ledger);
      EXPECT_TRUE(plan_attention(inputs, mask, Pass::forward,
                                 spattn::testing::planning_options(2000, algorithm, line_words)) == plan);
    }
  }
}

// The tiles follow L: in the word model the density-adaptive small_cache moves single words (no
// line-sized runs), in lines of 16 it moves runs of whole line parts; the dense small_cache's
// tiles are chosen for the L they are told.
TEST(LineModel, TheTilesAreChosenForTheLineSize) {
  const int64_t n = 1024, d = 64;
  const Mask mask = Mask::from_spec("random:p=0.05,seed=1", n, n);
  const Plan words = plan_heads({n, n, d, d}, mask, Pass::backward,
      {4096, Algorithm::small_cache, 1, spattn::SwitchSearch::skip, PlanObjective::words, 1});
  const Plan lines = plan_heads({n, n, d, d}, mask, Pass::backward,
      {4096, Algorithm::small_cache, 1, spattn::SwitchSearch::skip, PlanObjective::words, 16});
  EXPECT_EQ(words.small_cache.tiles.find(" run "), std::string::npos) << words.small_cache.tiles;
  EXPECT_NE(lines.small_cache.tiles.find(" run 16"), std::string::npos) << lines.small_cache.tiles;
  // The word model's tiles move fewer words than the tiles chosen for lines.
  EXPECT_LT(words.total(), lines.total());
  EXPECT_EQ(words.line_words, 1);
  EXPECT_EQ(lines.line_words, 16);
}

TEST(LineModel, ABadLineSizeOrAnotherLedgersIsRefusedBeforeAnythingRuns) {
  ApiProblem problem(1, 1, 1, 7, 7, 4);
  const Mask mask = Mask::full(7, 7);
  for (const int64_t bad : {int64_t{-1}, int64_t{3}, int64_t{24}, int64_t{2048}}) {
    SCOPED_TRACE(bad);
    AttentionOptions options = testing::options_for(Algorithm::flash, 300);
    options.line_words = bad;
    expect_invalid_argument([&] { problem.run({mask}, options); },
                                     "line_words = " + std::to_string(bad));
    EXPECT_TRUE(std::isnan(problem.o[0]));  // nothing written
    expect_invalid_argument(
        [&] {
          plan_heads({7, 7, 4, 4}, mask, Pass::forward,
              {300, Algorithm::automatic, 1, spattn::SwitchSearch::skip, PlanObjective::time, bad});
        },
        "line_words = " + std::to_string(bad));
  }
  io::Ledger ledger(16);
  AttentionOptions options = testing::options_for(Algorithm::flash, 300);
  options.ledger = &ledger;
  options.line_words = 1;
  expect_invalid_argument([&] { problem.run({mask}, options); },
                                   "line_words = 1 but the ledger counts lines of 16 words");
  EXPECT_EQ(ledger.total().total(), 0);
  EXPECT_TRUE(std::isnan(problem.o[0]));
}

// In the paper's word model (L = 1) auto's last switch, where flash takes over for good, lies
// within 0.5x to 2x of the theory's M: Z_input^2 / Z_QK over random masks (d = 64).
void expect_random_mask_switches_near_the_theory(int64_t n) {
  for (const double density : {0.01, 0.05, 0.2}) {
    const Mask mask = Mask::from_spec("random:p=" + std::to_string(density) + ",seed=1", n, n);
    for (const Pass pass : {Pass::forward, Pass::backward}) {
      const Plan plan = plan_heads({n, n, 64, 64}, mask, pass,
          {4096, Algorithm::automatic, 1, spattn::SwitchSearch::search, PlanObjective::words, 1});
      ASSERT_FALSE(plan.switches.empty());
      const double ratio = static_cast<double>(plan.switches.back()) / plan.theoretical_switch;
      std::printf("n = %lld, random p = %.2f, %s: switch at M = %lld, %.3f x Z_input^2 / Z_QK = %.0f\n",
                  static_cast<long long>(n), density, pass_name(pass),
                  static_cast<long long>(plan.switches.back()), ratio, plan.theoretical_switch);
      EXPECT_GE(ratio, 0.5) << n << " " << density << " " << pass_name(pass);
      EXPECT_LE(ratio, 2.0) << n << " " << density << " " << pass_name(pass);
    }
  }
}

TEST(LineModel, InTheWordModelTheSwitchIsWhereThePaperPutsIt) {
  const int64_t n = 2048;
  expect_random_mask_switches_near_the_theory(n);
  // Dense: within 0.5x to 2x of d^2. Planned for words, the paper's measure: for time the backward
  // accumulates dQ in its dK/dV pass, 5 products a pair for 7 at up to 1.4x the words, which moves
  // its switch to about 2.6 d^2.
  for (const int64_t d : {32, 64, 128}) {
    for (const Pass pass : {Pass::forward, Pass::backward}) {
      const Plan plan = dense_plan({n, n, d, d}, pass,
          {d * d, Algorithm::automatic, 1, spattn::SwitchSearch::skip, spattn::PlanObjective::words, 1});
      ASSERT_FALSE(plan.switches.empty());
      const double ratio = static_cast<double>(plan.switches.back()) / static_cast<double>(d * d);
      std::printf("full d = %lld, %s: switch at M = %lld, %.3f x d^2\n", static_cast<long long>(d), pass_name(pass),
                  static_cast<long long>(plan.switches.back()), ratio);
      EXPECT_GE(ratio, 0.5) << d << " " << pass_name(pass);
      EXPECT_LE(ratio, 2.0) << d << " " << pass_name(pass);
    }
  }
}

// n = 4096 (labelled slow: about 20 s of switch searches). At p = 0.01 the backward's switch
// depends on flash keeping all 4096 query rows in one dQ tile once they fit (flash_tiles.cpp).
TEST(LineModel, InTheWordModelTheSwitchIsWhereThePaperPutsItAt4096Tokens) {
  expect_random_mask_switches_near_the_theory(4096);
}

}  // namespace
}  // namespace spattn
