// Tier 2 for the small-cache schedule: forward and backward against the fp64 reference over
// sequence lengths, head dimensions and fast-memory sizes; native runs bit-identical to counted
// ones; worker teams bit-identical to one worker; empty sizes; validation messages.
#include "plan/dense_small_cache_tiles.hpp"
#include "schedules/small_cache/small_cache.hpp"

#include "support/head_fixture.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::testing::contains;
using spattn::testing::expect_backward_near;
using spattn::testing::expect_equal_outputs;
using spattn::testing::expect_forward_near;
using spattn::testing::expect_nontrivial_outputs;
using spattn::testing::HeadFixture;
using spattn::testing::HeadReference;
using spattn::testing::message_of;
using spattn::testing::reference_of;

void run_forward(HeadFixture& p, int64_t cache_words, Ledger* ledger) {
  FastMemory fast(cache_words, ledger, "small_cache forward");
  small_cache_forward(fast, p.forward(), small_cache_tiles(p.shape, cache_words, Pass::forward));
}

void run_backward(HeadFixture& p, int64_t cache_words, Ledger* ledger) {
  FastMemory fast(cache_words, ledger, "small_cache backward");
  small_cache_backward(fast, p.backward(), small_cache_tiles(p.shape, cache_words, Pass::backward));
}

// Forward then backward (on the forward's own O and LSE) at fast memory M, compared with the
// reference. Returns the problem for further checks.
HeadFixture check_against_reference(const HeadShape& shape, int64_t cache_words, const HeadReference& expected,
                                uint32_t seed = 1) {
  HeadFixture p(shape, seed);
  Ledger ledger;
  run_forward(p, cache_words, &ledger);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  expect_forward_near(p, expected, d + n);
  run_backward(p, cache_words, &ledger);
  // Gradients chain the score products (d, e terms) with sums over keys or queries.
  expect_backward_near(p, expected, d + e + m + n);
  EXPECT_LE(ledger.peak_resident(), cache_words);
  return p;
}

TEST(SmallCache, MatchesTheReferenceOverSizesHeadDimsAndCacheSizes) {
  const std::pair<int64_t, int64_t> seqlens[] = {{1, 1},  {7, 7},   {97, 97}, {257, 257},
                                                 {7, 97}, {97, 7},  {1, 257}, {257, 1}};
  for (const auto& [m, n] : seqlens) {
    for (int64_t d : {1, 8, 64}) {
      const HeadShape shape{m, n, d, d};
      const HeadReference expected = reference_of(HeadFixture(shape));
      // The minimum (t = 1), a few small caches, M about d^2, and beyond n d. Tiny caches
      // move a word at a time: only on the smaller problems.
      std::vector<int64_t> caches = {17, 4 * d + 50, d * d + 5, 2 * std::max(m, n) * d + 11};
      if (m * n * d <= 100000) caches.push_back(small_cache_min_cache_words(shape, Pass::forward));
      for (int64_t cache_words : caches) {
        SCOPED_TRACE(::testing::Message() << "seqlen_q " << m << " seqlen_k " << n << " d " << d
                                          << " M " << cache_words);
        check_against_reference(shape, cache_words, expected);
      }
    }
  }
}

TEST(SmallCache, ValueHeadDimDifferentFromQueryHeadDim) {
  for (const HeadShape shape : {HeadShape{97, 61, 8, 24}, HeadShape{33, 70, 64, 5}}) {
    const HeadReference expected = reference_of(HeadFixture(shape));
    for (int64_t cache_words : {5, 40, 700, 20000}) {
      SCOPED_TRACE(::testing::Message() << "d " << shape.head_dim << " d_v " << shape.head_dim_v
                                        << " M " << cache_words);
      check_against_reference(shape, cache_words, expected);
    }
  }
}

TEST(SmallCache, OutputsAreNonTrivial) {
  const HeadShape shape{64, 64, 8, 8};
  expect_nontrivial_outputs(check_against_reference(shape, 100, reference_of(HeadFixture(shape))));
}

TEST(SmallCache, NativeRunIsBitIdenticalToCountedRun) {
  for (const HeadShape shape : {HeadShape{97, 45, 16, 16}, HeadShape{7, 257, 8, 3}}) {
    for (int64_t cache_words : {6, 90, 5000}) {
      HeadFixture counted(shape), native(shape);
      Ledger ledger;
      run_forward(counted, cache_words, &ledger);
      run_backward(counted, cache_words, &ledger);
      run_forward(native, cache_words, nullptr);
      run_backward(native, cache_words, nullptr);
      expect_equal_outputs(counted, native);
      EXPECT_EQ(counted.delta, native.delta);
    }
  }
}

// The team schedules (row blocks split round-robin over workers, each with its own fast memory)
// against the one-worker schedule: the same bits for 1, 2 and 3 workers, and the words all the
// workers move sum to the prediction.
TEST(SmallCache, WorkersGiveTheOneWorkerBitsAndMoveThePredictedWords) {
  for (const HeadShape shape : {HeadShape{97, 45, 16, 16}, HeadShape{257, 7, 8, 3}}) {
    for (int64_t cache_words : {6, 300, 5000}) {
      const SmallCacheTiles forward_tiles = small_cache_tiles(shape, cache_words, Pass::forward);
      const SmallCacheTiles backward_tiles = small_cache_tiles(shape, cache_words, Pass::backward);
      HeadFixture one(shape);
      run_forward(one, cache_words, nullptr);
      run_backward(one, cache_words, nullptr);
      for (int workers : {1, 2, 3}) {
        HeadFixture team(shape);
        Ledger forward_ledger, backward_ledger;
        spattn::cpu::WorkerMemories forward_memories(workers, cache_words, &forward_ledger, "f");
        small_cache_forward(forward_memories, team.forward(), forward_tiles);
        forward_memories.merge_ledgers();
        spattn::cpu::WorkerMemories backward_memories(workers, cache_words, &backward_ledger,
                                                      "b");
        small_cache_backward(backward_memories, team.backward(), backward_tiles);
        backward_memories.merge_ledgers();
        const std::string where =
            std::to_string(workers) + " workers, M " + std::to_string(cache_words);
        SCOPED_TRACE(where);
        expect_equal_outputs(team, one);
        EXPECT_EQ(team.delta, one.delta);
        const IoCount forward_words = predict_small_cache_forward(shape, forward_tiles);
        const IoCount backward_words = predict_small_cache_backward(shape, backward_tiles);
        EXPECT_EQ(forward_ledger.reads(), forward_words.reads) << where;
        EXPECT_EQ(forward_ledger.writes(), forward_words.writes) << where;
        EXPECT_EQ(backward_ledger.reads(), backward_words.reads) << where;
        EXPECT_EQ(backward_ledger.writes(), backward_words.writes) << where;
        EXPECT_LE(backward_ledger.peak_resident(), small_cache_fast_words(backward_tiles)) << where;
      }
      EXPECT_TRUE(std::any_of(one.dq.begin(), one.dq.end(), [](float x) { return x != 0.0f; }));
    }
  }
}

TEST(SmallCache, NoKeysGivesZeroOutputMinusInfinityLseAndZeroGradients) {
  HeadFixture p(HeadShape{5, 0, 4, 3});
  p.dq.assign(p.dq.size(), 9.0f);
  p.o.assign(p.o.size(), 9.0f);
  Ledger ledger;
  run_forward(p, 5, &ledger);
  EXPECT_EQ(p.o, std::vector<float>(15, 0.0f));
  EXPECT_EQ(p.lse, std::vector<float>(5, -std::numeric_limits<float>::infinity()));
  run_backward(p, 4, &ledger);
  EXPECT_EQ(p.dq, std::vector<float>(20, 0.0f));
  EXPECT_EQ(p.delta, std::vector<float>(5, 0.0f));
}

TEST(SmallCache, NoQueriesGivesZeroKeyGradients) {
  HeadFixture p(HeadShape{0, 6, 4, 3});
  p.dk.assign(p.dk.size(), 9.0f);
  p.dv.assign(p.dv.size(), 9.0f);
  run_forward(p, 50, nullptr);
  run_backward(p, 50, nullptr);
  EXPECT_EQ(p.dk, std::vector<float>(24, 0.0f));
  EXPECT_EQ(p.dv, std::vector<float>(18, 0.0f));
}

TEST(SmallCache, CacheBelowTheMinimumIsRejectedStatingIt) {
  const HeadShape shape{8, 8, 4, 4};
  EXPECT_EQ(small_cache_min_cache_words(shape, Pass::forward), 5);
  EXPECT_EQ(small_cache_min_cache_words(shape, Pass::backward), 4);
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { small_cache_tiles(shape, 4, Pass::forward); }),
      "small_cache_tiles: fast memory M = 4 words is below the minimum of 5 words for the "
      "small-cache forward"));
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { small_cache_tiles(shape, 3, Pass::backward); }),
      "below the minimum of 4 words for the small-cache backward"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { small_cache_tiles(HeadShape{8, -1, 4, 4}, 100, Pass::forward); }),
                       "seqlen_k -1"));
}

TEST(SmallCache, MismatchedOperandsAreRejectedBeforeAnythingIsWritten) {
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);  // outputs at 7: nothing may change them
  const auto tiles = small_cache_tiles(p.shape, 100, Pass::forward);
  FastMemory fast(100, nullptr, "test");
  HeadForward head = p.forward();
  head.k = SlowMatrix<const float>::dense(p.k.data(), 5, 3);
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { small_cache_forward(fast, head, tiles); }),
      "small_cache_forward: k has head_dim 3, q has 4"));
  head = p.forward();
  head.lse = SlowMatrix<float>::dense(p.lse.data(), 5, 1);
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { small_cache_forward(fast, head, tiles); }),
      "small_cache_forward: lse is 5 x 1, expected 6 x 1"));

  const auto backward_tiles = small_cache_tiles(p.shape, 100, Pass::backward);
  HeadBackward grad = p.backward();
  grad.dv = SlowMatrix<float>::dense(p.dv.data(), 5, 2);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { small_cache_backward(fast, grad, backward_tiles); }),
                       "small_cache_backward: dv is 5 x 2, expected 5 x 3 (seqlen_k x head_dim_v)"));
  EXPECT_EQ(p.o, std::vector<float>(18, 7.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 7.0f));
  EXPECT_EQ(p.dv, std::vector<float>(15, 7.0f));
}

// Tiles chosen for another pass or shape cannot come from a plan (the plan hands the tiles out
// with the problem), so the schedule asserts them: a caller's bug, not bad input.
TEST(SmallCacheDeathTest, TilesForAnotherPassOrShapeAreAssertedAgainst) {
#ifdef NDEBUG
  GTEST_SKIP() << "the schedules assert their tiles; asserts are off in this build (NDEBUG)";
#else
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);
  const auto tiles = small_cache_tiles(p.shape, 100, Pass::forward);
  FastMemory fast(100, nullptr, "test");
  EXPECT_DEATH(small_cache_backward(fast, p.backward(), tiles), "small_cache tiles chosen for the other pass");
  const auto other_tiles = small_cache_tiles(HeadShape{7, 5, 4, 3}, 100, Pass::forward);
  EXPECT_DEATH(small_cache_forward(fast, p.forward(), other_tiles), "small_cache tiles chosen for another shape");
#endif
}

TEST(SmallCache, FastMemorySmallerThanTheTilesIsRefusedBeforeAnythingIsWritten) {
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);  // outputs at 7: nothing may change them
  const auto tiles = small_cache_tiles(p.shape, 100, Pass::forward);
  FastMemory fast(small_cache_fast_words(tiles) - 1, nullptr, "test");
  EXPECT_TRUE(contains(message_of<spattn::RuntimeError>(
                           [&] { small_cache_forward(fast, p.forward(), tiles); }),
                       "small_cache_forward: the tiles need"));
  EXPECT_EQ(p.o, std::vector<float>(18, 7.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 7.0f));
}

}  // namespace
