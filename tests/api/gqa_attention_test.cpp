// Grouped-query attention through the public API with flash and small_cache, dense and masked:
// agreement with the fp64 reference over odd sizes, counted == predicted (the dK/dV sums
// included), identical bits for 1, 2 and 3 threads, and a case checkable by hand.
#include "support/api_problem.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::testing::ApiProblem;

namespace {

// M per algorithm: several flash tiles per head at head_dim 12, and small_cache's small tiles.
int64_t cache_for(Algorithm algorithm) { return algorithm == Algorithm::small_cache ? 160 : 700; }

struct Shape {
  int64_t batch, heads, kv_heads, n_q, n_k, d;
};

std::string describe(const Shape& s, const std::string& spec, Algorithm algorithm) {
  return std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " heads, " + std::to_string(s.n_q) + " x " +
         std::to_string(s.n_k) + ", d " + std::to_string(s.d) + ", " + spec + ", " + spattn::algorithm_name(algorithm);
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> list = {
      {1, 4, 2, 97, 97, 12},  // pairs of query heads
      {2, 3, 1, 7, 7, 5},     // multi-query: every head shares one kv head
      {1, 6, 2, 33, 41, 8},   // seqlen_q != seqlen_k
      {1, 2, 1, 1, 1, 4},     // one query, one key
  };
  return list;
}

const std::vector<std::string>& specs() {
  static const std::vector<std::string> list = {"full", "causal", "sliding_window:w=5", "random:p=0.2,seed=3"};
  return list;
}

}  // namespace

TEST(GqaAttention, MatchesTheReferenceAndCountsWhatItPredicts) {
  for (const Shape& s : shapes()) {
    for (const std::string& spec : specs()) {
      const Mask mask = Mask::from_spec(spec, s.n_q, s.n_k);
      for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
        SCOPED_TRACE(describe(s, spec, algorithm));
        ApiProblem p(s.batch, s.heads, s.kv_heads, s.n_q, s.n_k, s.d);
        AttentionOptions forward_options, backward_options;
        spattn::io::Ledger forward_ledger, backward_ledger;
        forward_options.algorithm = backward_options.algorithm = algorithm;
        forward_options.cache_words = backward_options.cache_words = cache_for(algorithm);
        forward_options.threads = backward_options.threads = 2;
        forward_options.ledger = &forward_ledger;
        backward_options.ledger = &backward_ledger;
        const auto [forward_plan, backward_plan] = p.run({mask}, forward_options, backward_options);
        p.expect_matches_reference({mask});
        EXPECT_EQ(forward_ledger.reads(), forward_plan.reads);
        EXPECT_EQ(forward_ledger.writes(), forward_plan.writes);
        EXPECT_EQ(backward_ledger.reads(), backward_plan.reads);
        EXPECT_EQ(backward_ledger.writes(), backward_plan.writes);
        EXPECT_LE(backward_ledger.peak_resident(), cache_for(algorithm));
        // The sums read every query head's dK, dV once and write the kv head's once.
        const int64_t group = s.heads / s.kv_heads;
        const int64_t gradient_words = s.batch * s.kv_heads * s.n_k * 2 * s.d;
        EXPECT_EQ(backward_plan.kv_sum_reads, group * gradient_words);
        EXPECT_EQ(backward_plan.kv_sum_writes, gradient_words);
        EXPECT_EQ(forward_plan.kv_sum_reads + forward_plan.kv_sum_writes, 0);
        EXPECT_NE(backward_plan.to_string().find("grouped-query dK/dV sums: " + std::to_string(group * gradient_words)),
                  std::string::npos);
      }
    }
  }
}

TEST(GqaAttention, EveryThreadCountGivesTheSameBits) {
  const Shape s{2, 4, 2, 97, 97, 12};
  for (const std::string& spec : specs()) {
    const Mask mask = Mask::from_spec(spec, s.n_q, s.n_k);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = cache_for(algorithm);
      options.threads = 1;
      ApiProblem one(s.batch, s.heads, s.kv_heads, s.n_q, s.n_k, s.d);
      one.run({mask}, options);
      for (int threads : {2, 3}) {
        SCOPED_TRACE(describe(s, spec, algorithm) + ", threads " + std::to_string(threads));
        ApiProblem many(s.batch, s.heads, s.kv_heads, s.n_q, s.n_k, s.d);
        options.threads = threads;
        many.run({mask}, options);
        spattn::testing::expect_same_bits(one, many);
      }
    }
  }
}

TEST(GqaAttention, TwoIdenticalQueryHeadsDoubleTheGradientExactly) {
  // Query heads 0 and 1 carry the same q and dO, so their dK, dV parts are bit-identical and
  // their sum is exactly twice one head's gradient (doubling is exact in floating point); the
  // one-head problem is ordinary attention.
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    const int64_t n = 23, d = 6;
    const Mask mask = Mask::from_spec("causal", n, n);
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = cache_for(algorithm);
    ApiProblem one(1, 1, 1, n, n, d), pair(1, 2, 1, n, n, d);
    pair.k = one.k;
    pair.v = one.v;
    for (std::vector<float>* x : {&pair.q, &pair.d_o}) {
      const std::vector<float>& source = x == &pair.q ? one.q : one.d_o;
      x->assign(source.begin(), source.end());
      x->insert(x->end(), source.begin(), source.end());
    }
    one.run({mask}, options);
    pair.run({mask}, options);
    ASSERT_EQ(pair.dk.size(), one.dk.size());
    for (size_t i = 0; i < one.dk.size(); ++i) {
      EXPECT_EQ(pair.dk[i], 2.0f * one.dk[i]) << i;
      EXPECT_EQ(pair.dv[i], 2.0f * one.dv[i]) << i;
    }
    EXPECT_NE(one.dk[5], 0.0f);
    // Each query head's own outputs are the one-head problem's.
    EXPECT_TRUE(std::equal(one.o.begin(), one.o.end(), pair.o.begin()));
    EXPECT_TRUE(std::equal(one.dq.begin(), one.dq.end(), pair.dq.begin() + static_cast<long>(one.dq.size())));
  }
}

TEST(GqaAttention, AutomaticAndReferenceRunGroupedHeads) {
  const Shape s{1, 4, 2, 19, 19, 8};
  const Mask mask = Mask::from_spec("sliding_window:w=3", s.n_q, s.n_k);
  for (Algorithm algorithm : {Algorithm::automatic, Algorithm::reference}) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    ApiProblem p(s.batch, s.heads, s.kv_heads, s.n_q, s.n_k, s.d);
    AttentionOptions options;
    options.algorithm = algorithm;
    options.cache_words = 512;
    p.run({mask}, options);
    p.expect_matches_reference({mask});
  }
}

TEST(GqaAttention, HeadsThatAreNotAMultipleOfKvHeadsAreRefused) {
  ApiProblem p(1, 3, 2, 5, 5, 4);
  try {
    p.run({Mask::full(5, 5)}, AttentionOptions{});
    FAIL() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("attention_forward: q has 3 heads, not a multiple of k's 2 heads"),
              std::string::npos)
        << error.what();
  }
}
