// Native execution on several threads (AttentionOptions::threads): identical bits for every
// thread count and across runs, counted or native, agreement with the fp64 reference, and the
// argument checks. Counted == predicted with the workers' ledgers merged: threads_words_test.cpp.
#include <spattn/attention.hpp>

#include "schedules/flash/flash_heads.hpp"
#include "support/api_problem.hpp"
#include "support/compare.hpp"
#include "support/thread_cases.hpp"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::testing::ApiProblem;
using spattn::testing::describe_threads_run;
using spattn::testing::expect_same_bits;
using spattn::testing::threads_mask_specs;
using spattn::testing::threads_problem;
using ::testing::HasSubstr;

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

// Outside [0, kMaxThreads] (one rule with the PyTorch op): refused, naming the call and the value.
TEST(Threads, ThreadCountsOutOfRangeAreRefusedBeforeAnythingIsWritten) {
  for (const int threads : {-1, spattn::kMaxThreads + 1}) {
    const std::string value = "threads = " + std::to_string(threads) + " must be in [0, 4096]";
    ApiProblem p = threads_problem(1, 1, 6, 4);
    p.o.assign(24, 7.0f);
    p.lse.assign(6, 7.0f);
    AttentionOptions options;
    options.threads = threads;
    try {
      spattn::attention_forward(p.in(p.q, 1, 6, 4), p.in(p.k, 1, 6, 4), p.in(p.v, 1, 6, 4), p.out(p.o, 1, 6, 4),
                                p.out(p.lse, 1, 6, 1), {}, options);
      FAIL() << "expected an error";
    } catch (const spattn::InvalidArgument& error) {
      EXPECT_THAT(error.what(), HasSubstr("attention_forward: " + value));
    }
    EXPECT_EQ(p.o, std::vector<float>(24, 7.0f));
    try {
      p.dq.assign(24, 0.0f);
      p.dk.assign(24, 0.0f);
      p.dv.assign(24, 0.0f);
      spattn::attention_backward(p.in(p.q, 1, 6, 4), p.in(p.k, 1, 6, 4), p.in(p.v, 1, 6, 4), p.in(p.o, 1, 6, 4),
                                 p.in(p.lse, 1, 6, 1), p.in(p.d_o, 1, 6, 4), p.out(p.dq, 1, 6, 4),
                                 p.out(p.dk, 1, 6, 4), p.out(p.dv, 1, 6, 4), {}, options);
      FAIL() << "expected an error";
    } catch (const spattn::InvalidArgument& error) {
      EXPECT_THAT(error.what(), HasSubstr("attention_backward: " + value));
    }
    EXPECT_EQ(p.dq, std::vector<float>(24, 0.0f));
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
