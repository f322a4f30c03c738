// Determinism over repeats: 50 calls of the same forward and backward give bitwise identical
// outputs and gradients, for every algorithm, on 1 and on 2 threads, with grouped-query heads
// (whose dK, dV sums are the order-sensitive part) and per-head masks. (threads_test.cpp checks
// that the thread count does not change the bits; this checks that nothing else does.)
#include <spattn/attention.hpp>

#include "support/api_problem.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::testing::ApiProblem;

namespace {

constexpr int kRepeats = 50;

std::vector<Mask> per_head_masks(int64_t n) {
  return {Mask::from_spec("causal", n, n), Mask::from_spec("sliding_window:w=5", n, n),
          Mask::from_spec("random:p=0.2,seed=3", n, n), Mask::full(n, n)};
}

}  // namespace

TEST(RepeatDeterminism, FiftyRepeatsGiveTheSameBitsForEveryAlgorithmOnOneAndTwoThreads) {
  const std::vector<Mask> masks = per_head_masks(61);
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic,
                                    Algorithm::reference}) {
    for (const int threads : {1, 2}) {
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = 2048;  // several tiles per head
      options.threads = threads;
      ApiProblem first(2, 4, 2, 61, 61, 12);
      first.run(masks, options);
      first.expect_matches_reference(masks);
      for (int repeat = 1; repeat < kRepeats; ++repeat) {
        ApiProblem again(2, 4, 2, 61, 61, 12);
        again.run(masks, options);
        SCOPED_TRACE(std::string(spattn::algorithm_name(algorithm)) + ", " + std::to_string(threads) +
                     " threads, repeat " + std::to_string(repeat));
        spattn::testing::expect_same_bits(first, again);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}
