// Native execution on several threads (AttentionOptions::threads): identical bits for every
// thread count and across runs, counted == predicted with the workers' ledgers merged (also when
// small_cache splits one head over the team: fewer heads than threads, sparse inputs), agreement
// with the fp64 reference, and the argument checks.
#include <spattn/attention.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>

#include "schedules/flash/flash_heads.hpp"
#include "support/api_problem.hpp"
#include "support/compare.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/thread_cases.hpp"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::TensorView;
using spattn::testing::ApiProblem;
using spattn::testing::describe_threads_run;
using spattn::testing::expect_same_bits;
using spattn::testing::threads_mask_specs;
using spattn::testing::threads_problem;
using ::testing::HasSubstr;

namespace {

// Counted == predicted with the workers' ledgers merged; each worker's fast memory is its own, so
// the peak is one worker's, within M.
void expect_counted_is_predicted(const spattn::io::Ledger& ledger, const spattn::Plan& plan, int64_t cache_words) {
  EXPECT_EQ(ledger.reads(), plan.reads);
  EXPECT_EQ(ledger.writes(), plan.writes);
  EXPECT_GT(ledger.reads(), 0);
  EXPECT_LE(ledger.peak_resident(), cache_words);
  EXPECT_GT(ledger.peak_resident(), 0);
}

}  // namespace

TEST(Threads, EveryThreadCountGivesTheSameBitsAsOneThread) {
  // 97 rows at M = 1500 and head_dim 20 make several outer tiles per head, so 2 and 3 threads
  // really split the tiles (and 2 x 3 heads); head_dim 20 is not a multiple of any vector width.
  for (const std::string& spec : threads_mask_specs()) {
    const Mask mask = Mask::from_spec(spec, 97, 97);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
      ApiProblem one = threads_problem(2, 3, 97, 20);
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = 1500;
      options.threads = 1;
      one.run({mask}, options);
      for (int threads : {2, 3, 1, 2}) {  // 1 and 2 twice: the same bits again on a second run
        SCOPED_TRACE(describe_threads_run(spec, algorithm, threads));
        ApiProblem many = threads_problem(2, 3, 97, 20);
        options.threads = threads;
        many.run({mask}, options);
        expect_same_bits(one, many);
      }
    }
  }
}

TEST(Threads, OneHeadWithManyTilesGivesTheSameBits) {
  // One head: only the tiles can be split.
  const Mask window = Mask::from_spec("sliding_window:w=17", 257, 257);
  const Mask full = Mask::full(257, 257);
  for (const Mask* mask : {&full, &window}) {
    ApiProblem one = threads_problem(1, 1, 257, 16);
    AttentionOptions options;
    options.algorithm = Algorithm::flash;
    options.cache_words = 2000;
    options.threads = 1;
    one.run({*mask}, options);
    ApiProblem two = threads_problem(1, 1, 257, 16), three = threads_problem(1, 1, 257, 16);
    options.threads = 2;
    two.run({*mask}, options);
    options.threads = 3;
    three.run({*mask}, options);
    expect_same_bits(one, two);
    expect_same_bits(one, three);
    EXPECT_GT(spattn::testing::max_abs(std::vector<double>(one.dk.begin(), one.dk.end())), 1e-3);
  }
}

TEST(Threads, CountedEqualsPredictedWhenTheWorkersLedgersAreMerged) {
  for (const std::string& spec : threads_mask_specs()) {
    const Mask mask = Mask::from_spec(spec, 97, 97);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(describe_threads_run(spec, algorithm, threads));
        ApiProblem p = threads_problem(2, 2, 97, 12);
        AttentionOptions forward_options, backward_options;
        spattn::io::Ledger forward_ledger, backward_ledger;
        forward_options.algorithm = backward_options.algorithm = algorithm;
        forward_options.cache_words = backward_options.cache_words = 700;
        forward_options.threads = backward_options.threads = threads;
        forward_options.ledger = &forward_ledger;
        backward_options.ledger = &backward_ledger;
        const auto [forward_plan, backward_plan] = p.run({mask}, forward_options, backward_options);
        expect_counted_is_predicted(forward_ledger, forward_plan, 700);
        expect_counted_is_predicted(backward_ledger, backward_plan, 700);
      }
    }
  }
}

TEST(Threads, SmallCacheWithFewerHeadsThanThreadsSplitsEachHeadWithTheSameBitsAndWords) {
  // 1 and 2 heads on up to 4 threads: each head's row blocks (the dense schedule's products, the
  // density-adaptive schedule's sweeps over a mask) are split over the whole team
  // (head_runner.cpp). M = 700 makes several row blocks per product or sweep at n = 97.
  const std::vector<Mask> masks{Mask::full(97, 97), Mask::from_spec("random:p=0.1,seed=4", 97, 97)};
  for (const Mask& mask : masks) {
    for (int64_t heads : {1, 2}) {
      ApiProblem one = threads_problem(1, heads, 97, 20);
      AttentionOptions options;
      options.algorithm = Algorithm::small_cache;
      options.cache_words = 700;
      options.threads = 1;
      one.run({mask}, options);
      EXPECT_GT(spattn::testing::max_abs(std::vector<double>(one.dq.begin(), one.dq.end())), 1e-3);
      for (int threads : {2, 3, 4}) {
        SCOPED_TRACE(std::string(mask.is_full() ? "full" : "random") + ", " + std::to_string(heads) +
                     " heads, threads " + std::to_string(threads));
        ApiProblem many = threads_problem(1, heads, 97, 20);
        AttentionOptions forward_options = options, backward_options = options;
        spattn::io::Ledger forward_ledger, backward_ledger;
        forward_options.threads = backward_options.threads = threads;
        forward_options.ledger = &forward_ledger;
        backward_options.ledger = &backward_ledger;
        const auto [forward_plan, backward_plan] = many.run({mask}, forward_options, backward_options);
        expect_same_bits(one, many);
        EXPECT_EQ(forward_plan.algorithm, Algorithm::small_cache);
        expect_counted_is_predicted(forward_ledger, forward_plan, 700);
        expect_counted_is_predicted(backward_ledger, backward_plan, 700);
      }
    }
  }
}

TEST(Threads, SmallCacheOnSparseInputsSplitsTheHeadWithTheSameBitsAndWords) {
  // Sparse (CSR) inputs are one head per call: on 3 threads small_cache splits it over the team;
  // the value and index words still sum to the plan's.
  using spattn::testing::SparseInput;
  const int64_t n = 97, d = 12;
  const SparseInput q = spattn::testing::sparse_input(n, d, 0.4, 41, 3);
  const SparseInput k = spattn::testing::sparse_input(n, d, 0.4, 42);
  const SparseInput v = spattn::testing::sparse_input(n, d, 0.4, 43);
  const std::vector<float> d_o = spattn::testing::random_floats(n * d, 44);
  const spattn::AttentionInputs inputs{spattn::AttentionInput::csr(q.csr.view()),
                                       spattn::AttentionInput::csr(k.csr.view()),
                                       spattn::AttentionInput::csr(v.csr.view())};
  const Mask full = Mask::full(n, n);
  struct Run {
    std::vector<float> o, lse, dq, dk, dv;
    spattn::io::Ledger forward_ledger, backward_ledger;
    spattn::Plan forward_plan, backward_plan;
  };
  const auto run = [&](int threads) {
    auto result = std::make_unique<Run>();
    Run& r = *result;
    const auto size = static_cast<size_t>(n * d);
    r.o.assign(size, 7.0f);
    r.lse.assign(static_cast<size_t>(n), 7.0f);
    r.dq.assign(size, 7.0f);
    r.dk.assign(size, 7.0f);
    r.dv.assign(size, 7.0f);
    AttentionOptions options;
    options.algorithm = Algorithm::small_cache;
    options.cache_words = 600;
    options.threads = threads;
    const auto matrix = [&](std::vector<float>& x, int64_t cols) { return TensorView<float>::matrix(x.data(), n, cols); };
    const auto input = [&](const std::vector<float>& x, int64_t cols) {
      return TensorView<const float>::matrix(x.data(), n, cols);
    };
    options.ledger = &r.forward_ledger;
    r.forward_plan = spattn::attention_forward(inputs, matrix(r.o, d), matrix(r.lse, 1), full, options);
    options.ledger = &r.backward_ledger;
    r.backward_plan = spattn::attention_backward(inputs, input(r.o, d), input(r.lse, 1), input(d_o, d), matrix(r.dq, d),
                                                 matrix(r.dk, d), matrix(r.dv, d), full, options);
    return result;
  };
  const auto one = run(1);
  EXPECT_GT(spattn::testing::max_abs(std::vector<double>(one->dk.begin(), one->dk.end())), 1e-3);
  const auto three = run(3);
  for (const auto& [a, b, what] : {std::tuple{&one->o, &three->o, "o"}, std::tuple{&one->lse, &three->lse, "lse"},
                                   std::tuple{&one->dq, &three->dq, "dq"}, std::tuple{&one->dk, &three->dk, "dk"},
                                   std::tuple{&one->dv, &three->dv, "dv"}}) {
    spattn::testing::expect_same_bits(*a, *b, what);
  }
  for (const auto& [ledger, plan] : {std::pair{&three->forward_ledger, &three->forward_plan},
                                     std::pair{&three->backward_ledger, &three->backward_plan}}) {
    EXPECT_EQ(plan->algorithm, Algorithm::small_cache);
    expect_counted_is_predicted(*ledger, *plan, 600);
    EXPECT_EQ(ledger->total(spattn::io::WordKind::index).total(), plan->small_cache.index_words);
    EXPECT_GT(plan->small_cache.index_words, 0);
  }
}

TEST(Threads, CountedRunsOnThreeThreadsGiveTheBitsOfNativeRunsOnTwo) {
  const Mask mask = Mask::from_spec("causal", 97, 97);
  ApiProblem counted = threads_problem(1, 2, 97, 20), native = threads_problem(1, 2, 97, 20);
  AttentionOptions options;
  options.algorithm = Algorithm::flash;
  options.cache_words = 1500;
  spattn::io::Ledger ledger;
  options.ledger = &ledger;
  options.threads = 3;
  counted.run({mask}, options);
  options.ledger = nullptr;
  options.threads = 2;
  native.run({mask}, options);
  expect_same_bits(counted, native);
}

TEST(Threads, ResultsMatchTheReferenceOnSeveralThreads) {
  const int64_t n = 97, d = 20, heads = 3;
  for (const std::string& spec : threads_mask_specs()) {
    SCOPED_TRACE(spec);
    const Mask mask = Mask::from_spec(spec, n, n);
    ApiProblem p = threads_problem(1, heads, n, d);
    AttentionOptions options;
    options.algorithm = Algorithm::flash;
    options.cache_words = 1500;
    options.threads = 3;
    p.run({mask}, options);
    p.expect_matches_reference({mask});
  }
}

TEST(Threads, MoreThreadsThanTilesOrHeadsAndTheDefaultCount) {
  const Mask mask = Mask::from_spec("causal", 5, 5);
  ApiProblem one = threads_problem(1, 1, 5, 3), sixteen = threads_problem(1, 1, 5, 3), hardware = threads_problem(1, 1, 5, 3);
  AttentionOptions options;
  options.algorithm = Algorithm::flash;
  options.threads = 1;
  one.run({mask}, options);
  options.threads = 16;
  sixteen.run({mask}, options);
  options.threads = 0;  // std::thread::hardware_concurrency()
  hardware.run({mask}, options);
  expect_same_bits(one, sixteen);
  expect_same_bits(one, hardware);
  EXPECT_NE(one.o[0], 0.0f);
}

TEST(Threads, EmptyShapesRunOnSeveralThreads) {
  for (int64_t n : {int64_t{0}, int64_t{1}}) {
    ApiProblem p = threads_problem(2, 2, n, 4);
    AttentionOptions options;
    options.algorithm = Algorithm::flash;
    options.threads = 3;
    p.run({Mask::full(n, n)}, options);
    // One key: P = 1 and dS = dP - D = 0 up to rounding; every output written (no NaN left).
    for (float value : p.dq) EXPECT_LE(std::fabs(value), 1e-5f);
    for (float value : p.dv) EXPECT_TRUE(std::isfinite(value));
    EXPECT_EQ(p.o, p.v);
  }
  ApiProblem no_heads = threads_problem(0, 3, 9, 4);
  AttentionOptions options;
  options.threads = 2;
  no_heads.run({Mask::full(9, 9)}, options);
  EXPECT_TRUE(no_heads.o.empty());
}

TEST(Threads, NegativeThreadCountsAreRefusedBeforeAnythingIsWritten) {
  ApiProblem p = threads_problem(1, 1, 6, 4);
  p.o.assign(24, 7.0f);
  p.lse.assign(6, 7.0f);
  AttentionOptions options;
  options.threads = -1;
  try {
    spattn::attention_forward(p.in(p.q, 1, 6, 4), p.in(p.k, 1, 6, 4), p.in(p.v, 1, 6, 4), p.out(p.o, 1, 6, 4),
                              p.out(p.lse, 1, 6, 1), options);
    FAIL() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("attention_forward: threads = -1 must be >= 0"));
  }
  EXPECT_EQ(p.o, std::vector<float>(24, 7.0f));
  try {
    p.dq.assign(24, 0.0f);
    p.dk.assign(24, 0.0f);
    p.dv.assign(24, 0.0f);
    spattn::attention_backward(p.in(p.q, 1, 6, 4), p.in(p.k, 1, 6, 4), p.in(p.v, 1, 6, 4), p.in(p.o, 1, 6, 4),
                               p.in(p.lse, 1, 6, 1), p.in(p.d_o, 1, 6, 4), p.out(p.dq, 1, 6, 4),
                               p.out(p.dk, 1, 6, 4), p.out(p.dv, 1, 6, 4), options);
    FAIL() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("attention_backward: threads = -1 must be >= 0"));
  }
}

TEST(Threads, FlashHeadsOfDifferentShapesAreRefused) {
  using namespace spattn::schedules;
  std::vector<float> a(8 * 4, 0.5f), b(6 * 4, 0.5f), o(8 * 4), lse(8), o2(6 * 4), lse2(6);
  auto view = [](std::vector<float>& x, int64_t rows, int64_t cols) {
    return spattn::io::SlowMatrix<float>::dense(x.data(), rows, cols);
  };
  auto in = [](const std::vector<float>& x, int64_t rows, int64_t cols) {
    return spattn::io::SlowMatrix<const float>::dense(x.data(), rows, cols);
  };
  const std::vector<HeadForward> heads = {
      {in(a, 8, 4), in(a, 8, 4), in(a, 8, 4), view(o, 8, 4), view(lse, 8, 1), 0.5f},
      {in(b, 6, 4), in(b, 6, 4), in(b, 6, 4), view(o2, 6, 4), view(lse2, 6, 1), 0.5f},
  };
  FlashTeam team;
  team.threads = 2;
  team.cache_words = 1000;
  try {
    flash_forward_heads(team, heads, FlashTiles{4, 2, 0, 0});
    FAIL() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("flash forward: heads differ in shape (6 x 6 x 4 x 4 vs 8 x 8 x 4 x 4)"));
  }
}
