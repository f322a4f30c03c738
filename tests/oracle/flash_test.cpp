// The flash schedule's numerics: hand-checked values, then forward and backward against the fp64
// reference (tolerance rule of tests/support/compare.hpp) over sequence lengths 0..257,
// rectangular shapes, head_dim 1..64, head_dim_v != head_dim, and fast memories from the minimum
// to the whole problem; native and counted runs agree bit for bit; bad arguments are refused
// before anything is written. The word counts are tests/io/flash_io_test.cpp's.
#include "plan/dense_flash_tiles.hpp"
#include "support/flash_runs.hpp"
#include "support/head_fixture.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::testing::expect_backward_near;
using spattn::testing::expect_forward_near;
using spattn::testing::fp32_tolerance;
using spattn::testing::HeadFixture;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::reference_of;
using spattn::testing::run_flash_backward;
using spattn::testing::run_flash_forward;
using spattn::testing::same_bits;
using spattn::testing::widen;
using ::testing::HasSubstr;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Forward and backward of `head` with the tiles flash_tiles() picks for each M, against the fp64
// reference; counted and native runs must agree bit for bit.
void check_against_reference(const HeadFixture& head, const std::vector<int64_t>& cache_sizes) {
  const HeadShape& s = head.shape;
  const auto expected = reference_of(head);
  // Forward: score dot products of head_dim terms, then sums over seqlen_k keys. Backward: the
  // same plus dO . V (head_dim_v terms) and sums over seqlen_q queries (dK, dV).
  const int64_t forward_terms = s.head_dim + s.seqlen_k;
  const int64_t backward_terms = std::max(s.head_dim, s.head_dim_v) + std::max(s.seqlen_q, s.seqlen_k);

  for (const int64_t cache_words : cache_sizes) {
    SCOPED_TRACE("M = " + std::to_string(cache_words));
    const FlashTiles fwd_tiles = flash_tiles(s, cache_words, Pass::forward);
    const FlashTiles bwd_tiles = flash_tiles(s, cache_words, Pass::backward);
    HeadFixture counted = head, native = head;
    Ledger ledger;
    run_flash_forward(counted, fwd_tiles, cache_words, nullptr, &ledger);
    expect_forward_near(counted, expected, forward_terms);
    run_flash_forward(native, fwd_tiles, cache_words);
    EXPECT_TRUE(same_bits(counted.o, native.o) && same_bits(counted.lse, native.lse));

    run_flash_backward(counted, bwd_tiles, cache_words, nullptr, &ledger);
    expect_backward_near(counted, expected, backward_terms);
    run_flash_backward(native, bwd_tiles, cache_words);
    EXPECT_TRUE(same_bits(counted.dq, native.dq) && same_bits(counted.dk, native.dk) &&
                same_bits(counted.dv, native.dv));

    // Non-trivial: the outputs carry signal (inputs are random, so exact zeros would be a bug).
    if (s.seqlen_q > 0 && s.seqlen_k > 0 && s.head_dim_v > 0) {
      EXPECT_GT(max_abs(widen(counted.o)), 0.0);
      EXPECT_GT(max_abs(widen(counted.dv)), 0.0);
      if (s.seqlen_k > 1 && s.head_dim > 0) {  // one key: P = 1 whatever S is, dS = 0
        EXPECT_GT(max_abs(widen(counted.dq)), 0.0);
        EXPECT_GT(max_abs(widen(counted.dk)), 0.0);
      }
    }
  }
}

// The minimum, a middle value and enough for the whole problem in one tile of each loop.
std::vector<int64_t> cache_sizes_for(const HeadShape& shape) {
  const int64_t minimum = flash_min_cache_words(shape, Pass::backward);
  const int64_t n_q = std::max<int64_t>(shape.seqlen_q, 1), n_k = std::max<int64_t>(shape.seqlen_k, 1);
  const int64_t whole = std::max(flash_resident_words(shape, {n_q, n_k, n_q, n_k}, Pass::forward),
                                 flash_resident_words(shape, {n_q, n_k, n_q, n_k}, Pass::backward));
  const auto middle = static_cast<int64_t>(std::sqrt(static_cast<double>(minimum) * static_cast<double>(whole)));
  return {minimum, std::max(middle, minimum), whole};
}

TEST(FlashForward, HandCheckedTwoKeys) {
  // scale 1, q = 1, k = (0, ln 3): S = (0, ln 3), P = (1/4, 3/4), LSE = ln 4, O = 3/4 * 4 = 3.
  HeadFixture head(HeadShape{1, 2, 1, 1});
  head.scale = 1.0f;
  head.q = {1.0f};
  head.k = {0.0f, std::log(3.0f)};
  head.v = {0.0f, 4.0f};
  head.d_o = {1.0f};
  for (const FlashTiles tiles : {FlashTiles{1, 1, 1, 1}, FlashTiles{1, 2, 2, 1}}) {
    head.poison_outputs(kNan);
    run_flash_forward(head, tiles, 1000);
    EXPECT_NEAR(head.o[0], 3.0f, 1e-6f);
    EXPECT_NEAR(head.lse[0], std::log(4.0f), 1e-6f);
    // D = dO . O = 3, dP = dO v = (0, 4), dS = P (dP - D) = (-3/4, 3/4);
    // dQ = dS K = 3/4 ln 3, dK = dS^T q = (-3/4, 3/4), dV = P^T dO = (1/4, 3/4).
    run_flash_backward(head, tiles, 1000);
    EXPECT_NEAR(head.delta[0], 3.0f, 1e-6f);
    EXPECT_NEAR(head.dq[0], 0.75f * std::log(3.0f), 1e-6f);
    EXPECT_NEAR(head.dk[0], -0.75f, 1e-6f);
    EXPECT_NEAR(head.dk[1], 0.75f, 1e-6f);
    EXPECT_NEAR(head.dv[0], 0.25f, 1e-6f);
    EXPECT_NEAR(head.dv[1], 0.75f, 1e-6f);
  }
}

TEST(Flash, MatchesReferenceOnSquareShapes) {
  for (const int64_t n : {1, 7, 97, 257}) {
    for (const int64_t d : {1, 8, 64}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", d = " + std::to_string(d));
      const HeadShape shape{n, n, d, d};
      check_against_reference(HeadFixture(shape, static_cast<uint32_t>(n * 100 + d)), cache_sizes_for(shape));
    }
  }
}

TEST(Flash, MatchesReferenceOnRectangularShapesAndHeadDimV) {
  const HeadShape shapes[] = {{7, 97, 8, 8},   {257, 7, 8, 8},   {97, 1, 64, 64},
                              {1, 257, 8, 8},  {97, 257, 8, 24}, {64, 65, 16, 3},
                              {33, 20, 1, 64}};
  for (const HeadShape& shape : shapes) {
    SCOPED_TRACE("n_q = " + std::to_string(shape.seqlen_q) + ", n_k = " +
                 std::to_string(shape.seqlen_k) + ", d = " + std::to_string(shape.head_dim) +
                 ", d_v = " + std::to_string(shape.head_dim_v));
    check_against_reference(HeadFixture(shape, static_cast<uint32_t>(shape.seqlen_q * 7 + shape.seqlen_k)),
                            cache_sizes_for(shape));
  }
}

TEST(Flash, HandPickedTilesThatDoNotDivideTheSequences) {
  // Tiles the planner would not pick (partial tiles at both ends, inner larger than outer).
  const HeadShape shape{97, 61, 8, 8};
  HeadFixture a(shape, 5), b(shape, 5);
  run_flash_forward(a, {5, 13, 0, 0}, 100000);
  run_flash_forward(b, {97, 61, 0, 0}, 100000);
  EXPECT_LE(max_abs_error(a.o, widen(b.o)), fp32_tolerance(shape.head_dim + shape.seqlen_k, 1.0));
  b.o = a.o;  // both backward runs read the same forward outputs
  b.lse = a.lse;
  run_flash_backward(a, {3, 11, 7, 29}, 100000);
  run_flash_backward(b, {97, 61, 97, 61}, 100000);
  const int64_t terms = shape.head_dim + shape.seqlen_q;
  EXPECT_LE(max_abs_error(a.dq, widen(b.dq)), fp32_tolerance(terms, max_abs(widen(b.dq))));
  EXPECT_LE(max_abs_error(a.dk, widen(b.dk)), fp32_tolerance(terms, max_abs(widen(b.dk))));
  EXPECT_LE(max_abs_error(a.dv, widen(b.dv)), fp32_tolerance(terms, max_abs(widen(b.dv))));
}

TEST(Flash, NoKeysGivesZeroOutputMinusInfLseAndZeroGradients) {
  const HeadShape shape{7, 0, 8, 8};
  HeadFixture head(shape, 1);
  const int64_t cache_words = flash_min_cache_words(shape, Pass::backward);
  run_flash_forward(head, flash_tiles(shape, cache_words, Pass::forward), cache_words);
  for (const float value : head.o) EXPECT_EQ(value, 0.0f);
  for (const float value : head.lse) EXPECT_EQ(value, kNegInf);
  run_flash_backward(head, flash_tiles(shape, cache_words, Pass::backward), cache_words);
  for (const float value : head.dq) EXPECT_EQ(value, 0.0f);
  for (const float value : head.delta) EXPECT_TRUE(std::isnan(value)) << "D is not needed, not written";
}

TEST(Flash, NoQueriesGivesZeroKeyGradients) {
  const HeadShape shape{0, 7, 8, 4};
  HeadFixture head(shape, 2);
  const int64_t cache_words = 1000;
  run_flash_forward(head, flash_tiles(shape, cache_words, Pass::forward), cache_words);
  EXPECT_TRUE(head.o.empty() && head.lse.empty());
  run_flash_backward(head, flash_tiles(shape, cache_words, Pass::backward), cache_words);
  ASSERT_EQ(head.dk.size(), 56u);
  ASSERT_EQ(head.dv.size(), 28u);
  for (const float value : head.dk) EXPECT_EQ(value, 0.0f);
  for (const float value : head.dv) EXPECT_EQ(value, 0.0f);
}

TEST(Flash, MinusInfLseRowContributesNothing) {
  // A row the forward found empty (LSE = -inf; only a mask produces it, which the dense schedule
  // still has to survive in its backward): zero gradients from it, never NaN.
  HeadFixture head(HeadShape{3, 5, 4, 4}, 3);
  run_flash_forward(head, {3, 5, 0, 0}, 1000);
  head.lse[1] = kNegInf;
  for (int64_t x = 0; x < 4; ++x) head.o[static_cast<size_t>(4 + x)] = 0.0f;
  run_flash_backward(head, {2, 2, 2, 2}, 1000);
  for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(head.dq[static_cast<size_t>(4 + x)], 0.0f);
  for (const float value : head.dk) EXPECT_FALSE(std::isnan(value));
  for (const float value : head.dv) EXPECT_FALSE(std::isnan(value));
}

// ---- Refusals: each names the argument and the values, and nothing is written -----------------

// The error of a forward whose o has o_shape's rows and head_dim_v, with this scale.
std::string forward_error(HeadFixture head, const HeadShape& o_shape, const FlashTiles& tiles, float scale) {
  std::vector<float> o(static_cast<size_t>(o_shape.seqlen_q * o_shape.head_dim_v), kNan);
  HeadForward problem = head.forward();
  problem.o = HeadFixture::out(o, o_shape.seqlen_q, o_shape.head_dim_v);
  problem.scale = scale;
  FastMemory fast(100000, nullptr, "flash forward");
  try {
    flash_forward(fast, problem, tiles);
  } catch (const spattn::InvalidArgument& error) {
    for (const float value : o) EXPECT_TRUE(std::isnan(value)) << "nothing may be written";
    return error.what();
  }
  return "(no error)";
}

TEST(FlashForward, RefusesAMisshapedOutput) {
  const HeadFixture head(HeadShape{7, 5, 8, 16}, 1);
  EXPECT_EQ(forward_error(head, {7, 5, 8, 8}, {4, 4, 0, 0}, 1.0f),
            "flash forward: o is 7 x 8, expected 7 x 16 (seqlen_q x head_dim_v)");
}

TEST(FlashForward, RefusesNonPositiveTilesAndNonFiniteScale) {
  const HeadFixture head(HeadShape{7, 5, 8, 8}, 1);
  EXPECT_EQ(forward_error(head, head.shape, {0, 4, 0, 0}, 1.0f),
            "flash forward: tile block_q = 0 rows must be positive");
  EXPECT_THAT(forward_error(head, head.shape, {4, 4, 0, 0}, std::numeric_limits<float>::infinity()),
              HasSubstr("flash forward: scale = inf must be finite"));
}

TEST(FlashBackward, RefusesMisshapedGradientsAndTiles) {
  HeadFixture head(HeadShape{7, 5, 8, 8}, 1);
  run_flash_forward(head, {4, 4, 0, 0}, 10000);
  try {
    run_flash_backward(head, {4, 4, 0, 4}, 10000);
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_STREQ(error.what(), "flash backward: tile dkdv_block_q = 0 rows must be positive");
  }
  std::vector<float> dk(40, kNan);  // 4 rows where k has 5
  HeadBackward problem = head.backward();
  problem.dk = HeadFixture::out(dk, 4, 8);
  FastMemory fast(10000, nullptr, "flash backward");
  try {
    flash_backward(fast, problem, {4, 4, 4, 4});
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_STREQ(error.what(), "flash backward: dk is 4 x 8, expected 5 x 8 (seqlen_k x head_dim)");
  }
  for (const float value : head.dq) EXPECT_TRUE(std::isnan(value));
  for (const float value : head.delta) EXPECT_TRUE(std::isnan(value));
}

TEST(Flash, TilesTooLargeForTheFastMemoryAreRefusedByIt) {
  HeadFixture head(HeadShape{64, 64, 8, 8}, 1);
  try {
    run_flash_forward(head, {64, 64, 0, 0}, 1000);
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::RuntimeError& error) {
    EXPECT_THAT(error.what(), HasSubstr("more than M = 1000"));
  }
}

}  // namespace
