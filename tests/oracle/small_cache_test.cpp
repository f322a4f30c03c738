// Tier 2 for the small-cache schedule: forward and backward against the fp64 reference over
// sequence lengths, head dimensions and fast-memory sizes; native runs bit-identical to counted
// ones; worker teams bit-identical to one worker; empty sizes; validation messages.
#include "schedules/small_cache/small_cache.hpp"

#include "support/compare.hpp"

#include <spattn/reference.hpp>

#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::TensorView;
using spattn::io::FastMemory;
using spattn::io::Ledger;
namespace reference = spattn::reference;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;

using spattn::testing::message_of;
using spattn::testing::contains;
std::vector<float> random_values(int64_t count, uint32_t seed) { return spattn::testing::random_floats(count, seed); }

using spattn::testing::widen;

// One head's inputs and outputs, fp32, row-major.
struct Problem {
  HeadShape shape;
  float scale = 1.0f;
  std::vector<float> q, k, v, d_o;
  std::vector<float> o, lse, delta, dq, dk, dv;

  explicit Problem(const HeadShape& s, uint32_t seed = 1) : shape(s) {
    const int64_t m = s.seqlen_q, n = s.seqlen_k, d = s.head_dim, e = s.head_dim_v;
    scale = d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
    // Larger logits than uniform(-1, 1) gives, so the softmax is far from uniform.
    q = random_values(m * d, seed);
    for (float& x : q) x *= 3.0f;
    k = random_values(n * d, seed + 1);
    v = random_values(n * e, seed + 2);
    d_o = random_values(m * e, seed + 3);
    o.assign(static_cast<size_t>(m * e), 0.0f);
    lse.assign(static_cast<size_t>(m), 0.0f);
    delta.assign(static_cast<size_t>(m), 0.0f);
    dq.assign(static_cast<size_t>(m * d), 0.0f);
    dk.assign(static_cast<size_t>(n * d), 0.0f);
    dv.assign(static_cast<size_t>(n * e), 0.0f);
  }
  HeadForward forward() {
    const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
    return {SlowMatrix<const float>::dense(q.data(), m, d),
            SlowMatrix<const float>::dense(k.data(), n, d),
            SlowMatrix<const float>::dense(v.data(), n, e), SlowMatrix<float>::dense(o.data(), m, e),
            SlowMatrix<float>::dense(lse.data(), m, 1), scale};
  }
  HeadBackward backward() {
    const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
    return {SlowMatrix<const float>::dense(q.data(), m, d),
            SlowMatrix<const float>::dense(k.data(), n, d),
            SlowMatrix<const float>::dense(v.data(), n, e),
            SlowMatrix<const float>::dense(o.data(), m, e),
            SlowMatrix<const float>::dense(lse.data(), m, 1),
            SlowMatrix<const float>::dense(d_o.data(), m, e),
            SlowMatrix<float>::dense(delta.data(), m, 1), SlowMatrix<float>::dense(dq.data(), m, d),
            SlowMatrix<float>::dense(dk.data(), n, d), SlowMatrix<float>::dense(dv.data(), n, e),
            scale};
  }
};

sparse_formats::CsrPattern<int32_t> full_mask(int64_t rows, int64_t cols) {
  auto mask = sparse_formats::CsrPattern<int32_t>::empty(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) mask.col_idx.push_back(static_cast<int32_t>(j));
    mask.row_ptr[static_cast<size_t>(i + 1)] = static_cast<int32_t>(mask.col_idx.size());
  }
  return mask;
}

struct Expected {
  reference::ForwardResult forward;
  reference::BackwardResult backward;
};

Expected reference_of(const Problem& p) {
  const HeadShape& s = p.shape;
  const auto q = widen(p.q), k = widen(p.k), v = widen(p.v), d_o = widen(p.d_o);
  const auto mask = full_mask(s.seqlen_q, s.seqlen_k);
  const reference::MaskList<int32_t> masks{mask.view()};
  const auto q_view = TensorView<const double>::matrix(q.data(), s.seqlen_q, s.head_dim);
  const auto k_view = TensorView<const double>::matrix(k.data(), s.seqlen_k, s.head_dim);
  const auto v_view = TensorView<const double>::matrix(v.data(), s.seqlen_k, s.head_dim_v);
  const auto d_o_view = TensorView<const double>::matrix(d_o.data(), s.seqlen_q, s.head_dim_v);
  return {reference::forward<int32_t>(q_view, k_view, v_view, masks, p.scale),
          reference::backward<int32_t>(q_view, k_view, v_view, d_o_view, masks, p.scale)};
}

void run_forward(Problem& p, int64_t cache_words, Ledger* ledger) {
  FastMemory fast(cache_words, ledger, "small_cache forward");
  small_cache_forward(fast, p.forward(), small_cache_tiles(p.shape, cache_words, Pass::forward));
}

void run_backward(Problem& p, int64_t cache_words, Ledger* ledger) {
  FastMemory fast(cache_words, ledger, "small_cache backward");
  small_cache_backward(fast, p.backward(), small_cache_tiles(p.shape, cache_words, Pass::backward));
}

// Forward then backward (on the forward's own O and LSE) at fast memory M, compared with the
// reference. Returns the problem for further checks.
Problem check_against_reference(const HeadShape& shape, int64_t cache_words,
                                const Expected& expected, uint32_t seed = 1) {
  Problem p(shape, seed);
  Ledger ledger;
  run_forward(p, cache_words, &ledger);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  const int64_t forward_terms = d + n;
  EXPECT_LE(max_abs_error(p.o, expected.forward.o),
            fp32_tolerance(forward_terms, max_abs(expected.forward.o)));
  EXPECT_LE(max_abs_error(p.lse, expected.forward.lse),
            fp32_tolerance(forward_terms, max_abs(expected.forward.lse)));
  run_backward(p, cache_words, &ledger);
  // Gradients chain the score products (d, e terms) with sums over keys or queries.
  const int64_t backward_terms = d + e + m + n;
  EXPECT_LE(max_abs_error(p.dq, expected.backward.dq),
            fp32_tolerance(backward_terms, max_abs(expected.backward.dq)));
  EXPECT_LE(max_abs_error(p.dk, expected.backward.dk),
            fp32_tolerance(backward_terms, max_abs(expected.backward.dk)));
  EXPECT_LE(max_abs_error(p.dv, expected.backward.dv),
            fp32_tolerance(backward_terms, max_abs(expected.backward.dv)));
  EXPECT_LE(ledger.peak_resident(), cache_words);
  return p;
}

TEST(SmallCache, MatchesTheReferenceOverSizesHeadDimsAndCacheSizes) {
  const std::pair<int64_t, int64_t> seqlens[] = {{1, 1},  {7, 7},   {97, 97}, {257, 257},
                                                 {7, 97}, {97, 7},  {1, 257}, {257, 1}};
  for (const auto& [m, n] : seqlens) {
    for (int64_t d : {1, 8, 64}) {
      const HeadShape shape{m, n, d, d};
      const Expected expected = reference_of(Problem(shape));
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
    const Expected expected = reference_of(Problem(shape));
    for (int64_t cache_words : {5, 40, 700, 20000}) {
      SCOPED_TRACE(::testing::Message() << "d " << shape.head_dim << " d_v " << shape.head_dim_v
                                        << " M " << cache_words);
      check_against_reference(shape, cache_words, expected);
    }
  }
}

TEST(SmallCache, OutputsAreNonTrivial) {
  const HeadShape shape{64, 64, 8, 8};
  const Problem p = check_against_reference(shape, 100, reference_of(Problem(shape)));
  const auto nontrivial = [](const std::vector<float>& x) {
    return max_abs(widen(x)) > 1e-2;
  };
  EXPECT_TRUE(nontrivial(p.o));
  EXPECT_TRUE(nontrivial(p.dq));
  EXPECT_TRUE(nontrivial(p.dk));
  EXPECT_TRUE(nontrivial(p.dv));
  // Not uniform attention (which would give LSE = log(seqlen_k) in every row).
  const auto [lo, hi] = std::minmax_element(p.lse.begin(), p.lse.end());
  EXPECT_GT(*hi - *lo, 0.5f);
}

TEST(SmallCache, NativeRunIsBitIdenticalToCountedRun) {
  for (const HeadShape shape : {HeadShape{97, 45, 16, 16}, HeadShape{7, 257, 8, 3}}) {
    for (int64_t cache_words : {6, 90, 5000}) {
      Problem counted(shape), native(shape);
      Ledger ledger;
      run_forward(counted, cache_words, &ledger);
      run_backward(counted, cache_words, &ledger);
      run_forward(native, cache_words, nullptr);
      run_backward(native, cache_words, nullptr);
      EXPECT_EQ(counted.o, native.o);
      EXPECT_EQ(counted.lse, native.lse);
      EXPECT_EQ(counted.delta, native.delta);
      EXPECT_EQ(counted.dq, native.dq);
      EXPECT_EQ(counted.dk, native.dk);
      EXPECT_EQ(counted.dv, native.dv);
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
      Problem one(shape);
      run_forward(one, cache_words, nullptr);
      run_backward(one, cache_words, nullptr);
      for (int workers : {1, 2, 3}) {
        Problem team(shape);
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
        EXPECT_EQ(team.o, one.o) << where;
        EXPECT_EQ(team.lse, one.lse) << where;
        EXPECT_EQ(team.delta, one.delta) << where;
        EXPECT_EQ(team.dq, one.dq) << where;
        EXPECT_EQ(team.dk, one.dk) << where;
        EXPECT_EQ(team.dv, one.dv) << where;
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
  Problem p(HeadShape{5, 0, 4, 3});
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
  Problem p(HeadShape{0, 6, 4, 3});
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
  Problem p(HeadShape{6, 5, 4, 3});
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
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { small_cache_backward(fast, p.backward(), tiles); }),
                       "small_cache_backward: tiles were chosen for the forward pass"));
  const auto other_tiles = small_cache_tiles(HeadShape{7, 5, 4, 3}, 100, Pass::forward);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { small_cache_forward(fast, p.forward(), other_tiles); }),
                       "tiles were chosen for seqlen_q 7, seqlen_k 5, head_dim 4, head_dim_v 3; "
                       "the problem has 6, 5, 4, 3"));
  EXPECT_EQ(p.o, std::vector<float>(18, 0.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 0.0f));
  EXPECT_EQ(p.dv, std::vector<float>(15, 0.0f));
}

TEST(SmallCache, FastMemorySmallerThanTheTilesIsRefusedBeforeAnythingIsWritten) {
  Problem p(HeadShape{6, 5, 4, 3});
  const auto tiles = small_cache_tiles(p.shape, 100, Pass::forward);
  FastMemory fast(60, nullptr, "test");
  EXPECT_TRUE(contains(message_of<spattn::RuntimeError>(
                           [&] { small_cache_forward(fast, p.forward(), tiles); }),
                       "small_cache_forward: the tiles need"));
  EXPECT_EQ(p.o, std::vector<float>(18, 0.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 0.0f));
}

}  // namespace
