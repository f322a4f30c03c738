// The flash schedule's numerics: hand-checked values, then forward and backward against the fp64
// reference (tolerance rule of tests/support/compare.hpp) over sequence lengths 0..257,
// rectangular shapes, head_dim 1..64, head_dim_v != head_dim, and fast memories from the minimum
// to the whole problem; native and counted runs agree bit for bit; bad arguments are refused
// before anything is written. The word counts are tests/flash_io_test.cpp's.
#include "schedules/flash/flash.hpp"

#include "support/compare.hpp"

#include <spattn/reference.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using ::testing::HasSubstr;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Inputs {
  HeadShape shape;
  float scale = 1.0f;
  std::vector<float> q, k, v, d_o;  // (n_q, d), (n_k, d), (n_k, e), (n_q, e)
};

std::vector<float> random_floats(int64_t count, float amplitude, std::mt19937_64& engine) {
  std::uniform_real_distribution<float> uniform(-amplitude, amplitude);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = uniform(engine);
  return values;
}

// Scores of a few units (softmax far from uniform), values and gradients of order 1.
Inputs random_inputs(const HeadShape& shape, uint64_t seed) {
  std::mt19937_64 engine(seed);
  Inputs in;
  in.shape = shape;
  in.scale = 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(shape.head_dim, 1)));
  in.q = random_floats(shape.seqlen_q * shape.head_dim, 2.0f, engine);
  in.k = random_floats(shape.seqlen_k * shape.head_dim, 2.0f, engine);
  in.v = random_floats(shape.seqlen_k * shape.head_dim_v, 1.0f, engine);
  in.d_o = random_floats(shape.seqlen_q * shape.head_dim_v, 1.0f, engine);
  return in;
}

struct ForwardOut {
  std::vector<float> o, lse;
};
struct BackwardOut {
  std::vector<float> dq, dk, dv, delta;
};

template <typename T>
SlowMatrix<T> slow(std::vector<std::remove_const_t<T>>& data, int64_t rows, int64_t cols) {
  return SlowMatrix<T>::dense(data.data(), rows, cols);
}
SlowMatrix<const float> slow_in(const std::vector<float>& data, int64_t rows, int64_t cols) {
  return SlowMatrix<const float>::dense(data.data(), rows, cols);
}

ForwardOut run_forward(const Inputs& in, const FlashTiles& tiles, int64_t cache_words,
                       Ledger* ledger) {
  const HeadShape& s = in.shape;
  ForwardOut out;
  out.o.assign(static_cast<size_t>(s.seqlen_q * s.head_dim_v), kNan);
  out.lse.assign(static_cast<size_t>(s.seqlen_q), kNan);
  HeadForward problem{slow_in(in.q, s.seqlen_q, s.head_dim), slow_in(in.k, s.seqlen_k, s.head_dim),
                      slow_in(in.v, s.seqlen_k, s.head_dim_v),
                      slow<float>(out.o, s.seqlen_q, s.head_dim_v), slow<float>(out.lse, s.seqlen_q, 1),
                      in.scale};
  FastMemory fast(cache_words, ledger, "flash forward");
  flash_forward(fast, problem, tiles);
  return out;
}

BackwardOut run_backward(const Inputs& in, const ForwardOut& fwd, const FlashTiles& tiles,
                         int64_t cache_words, Ledger* ledger) {
  const HeadShape& s = in.shape;
  BackwardOut out;
  out.dq.assign(static_cast<size_t>(s.seqlen_q * s.head_dim), kNan);
  out.dk.assign(static_cast<size_t>(s.seqlen_k * s.head_dim), kNan);
  out.dv.assign(static_cast<size_t>(s.seqlen_k * s.head_dim_v), kNan);
  out.delta.assign(static_cast<size_t>(s.seqlen_q), kNan);
  HeadBackward problem{slow_in(in.q, s.seqlen_q, s.head_dim),
                       slow_in(in.k, s.seqlen_k, s.head_dim),
                       slow_in(in.v, s.seqlen_k, s.head_dim_v),
                       slow_in(fwd.o, s.seqlen_q, s.head_dim_v),
                       slow_in(fwd.lse, s.seqlen_q, 1),
                       slow_in(in.d_o, s.seqlen_q, s.head_dim_v),
                       slow<float>(out.delta, s.seqlen_q, 1),
                       slow<float>(out.dq, s.seqlen_q, s.head_dim),
                       slow<float>(out.dk, s.seqlen_k, s.head_dim),
                       slow<float>(out.dv, s.seqlen_k, s.head_dim_v),
                       in.scale};
  FastMemory fast(cache_words, ledger, "flash backward");
  flash_backward(fast, problem, tiles);
  return out;
}

std::vector<double> to_double(const std::vector<float>& values) {
  return std::vector<double>(values.begin(), values.end());
}

spattn::TensorView<const double> view(const std::vector<double>& data, int64_t rows, int64_t cols) {
  return spattn::TensorView<const double>::matrix(data.data(), rows, cols);
}

sparse_formats::CsrPattern<int32_t> full_mask(int64_t rows, int64_t cols) {
  auto mask = sparse_formats::CsrPattern<int32_t>::empty(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) mask.col_idx.push_back(static_cast<int32_t>(j));
    mask.row_ptr[static_cast<size_t>(i + 1)] = static_cast<int32_t>((i + 1) * cols);
  }
  return mask;
}

template <typename T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Forward and backward of `in` with the tiles flash_tiles() picks for each M, against the fp64
// reference; counted and native runs must agree bit for bit.
void check_against_reference(const Inputs& in, const std::vector<int64_t>& cache_sizes) {
  const HeadShape& s = in.shape;
  const auto q = to_double(in.q), k = to_double(in.k), v = to_double(in.v), d_o = to_double(in.d_o);
  const auto mask = full_mask(s.seqlen_q, s.seqlen_k);
  const spattn::reference::MaskList<int32_t> masks{mask.view()};
  const auto ref_fwd = spattn::reference::forward<int32_t>(
      view(q, s.seqlen_q, s.head_dim), view(k, s.seqlen_k, s.head_dim),
      view(v, s.seqlen_k, s.head_dim_v), masks, static_cast<double>(in.scale));
  const auto ref_bwd = spattn::reference::backward<int32_t>(
      view(q, s.seqlen_q, s.head_dim), view(k, s.seqlen_k, s.head_dim),
      view(v, s.seqlen_k, s.head_dim_v), view(d_o, s.seqlen_q, s.head_dim_v), masks,
      static_cast<double>(in.scale));
  // Forward: score dot products of head_dim terms, then sums over seqlen_k keys. Backward: the
  // same plus dO . V (head_dim_v terms) and sums over seqlen_q queries (dK, dV).
  const int64_t forward_terms = s.head_dim + s.seqlen_k;
  const int64_t backward_terms = std::max(s.head_dim, s.head_dim_v) + std::max(s.seqlen_q, s.seqlen_k);

  for (const int64_t cache_words : cache_sizes) {
    SCOPED_TRACE("M = " + std::to_string(cache_words));
    const FlashTiles fwd_tiles = flash_tiles(s, cache_words, Pass::forward);
    const FlashTiles bwd_tiles = flash_tiles(s, cache_words, Pass::backward);
    Ledger ledger;
    const ForwardOut fwd = run_forward(in, fwd_tiles, cache_words, &ledger);
    EXPECT_LE(max_abs_error(fwd.o, ref_fwd.o), fp32_tolerance(forward_terms, max_abs(ref_fwd.o)));
    EXPECT_LE(max_abs_error(fwd.lse, ref_fwd.lse),
              fp32_tolerance(forward_terms, max_abs(ref_fwd.lse)));
    const ForwardOut native_fwd = run_forward(in, fwd_tiles, cache_words, nullptr);
    EXPECT_TRUE(bit_identical(fwd.o, native_fwd.o) && bit_identical(fwd.lse, native_fwd.lse));

    const BackwardOut bwd = run_backward(in, fwd, bwd_tiles, cache_words, &ledger);
    EXPECT_LE(max_abs_error(bwd.dq, ref_bwd.dq), fp32_tolerance(backward_terms, max_abs(ref_bwd.dq)));
    EXPECT_LE(max_abs_error(bwd.dk, ref_bwd.dk), fp32_tolerance(backward_terms, max_abs(ref_bwd.dk)));
    EXPECT_LE(max_abs_error(bwd.dv, ref_bwd.dv), fp32_tolerance(backward_terms, max_abs(ref_bwd.dv)));
    const BackwardOut native_bwd = run_backward(in, fwd, bwd_tiles, cache_words, nullptr);
    EXPECT_TRUE(bit_identical(bwd.dq, native_bwd.dq) && bit_identical(bwd.dk, native_bwd.dk) &&
                bit_identical(bwd.dv, native_bwd.dv));

    // Non-trivial: the outputs carry signal (inputs are random, so exact zeros would be a bug).
    if (s.seqlen_q > 0 && s.seqlen_k > 0 && s.head_dim_v > 0) {
      EXPECT_GT(max_abs(to_double(fwd.o)), 0.0);
      EXPECT_GT(max_abs(to_double(bwd.dv)), 0.0);
      if (s.seqlen_k > 1 && s.head_dim > 0) {  // one key: P = 1 whatever S is, dS = 0
        EXPECT_GT(max_abs(to_double(bwd.dq)), 0.0);
        EXPECT_GT(max_abs(to_double(bwd.dk)), 0.0);
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
  Inputs in;
  in.shape = {1, 2, 1, 1};
  in.q = {1.0f};
  in.k = {0.0f, std::log(3.0f)};
  in.v = {0.0f, 4.0f};
  in.d_o = {1.0f};
  for (const FlashTiles tiles : {FlashTiles{1, 1, 1, 1}, FlashTiles{1, 2, 2, 1}}) {
    const ForwardOut fwd = run_forward(in, tiles, 1000, nullptr);
    EXPECT_NEAR(fwd.o[0], 3.0f, 1e-6f);
    EXPECT_NEAR(fwd.lse[0], std::log(4.0f), 1e-6f);
    // D = dO . O = 3, dP = dO v = (0, 4), dS = P (dP - D) = (-3/4, 3/4);
    // dQ = dS K = 3/4 ln 3, dK = dS^T q = (-3/4, 3/4), dV = P^T dO = (1/4, 3/4).
    const BackwardOut bwd = run_backward(in, fwd, tiles, 1000, nullptr);
    EXPECT_NEAR(bwd.delta[0], 3.0f, 1e-6f);
    EXPECT_NEAR(bwd.dq[0], 0.75f * std::log(3.0f), 1e-6f);
    EXPECT_NEAR(bwd.dk[0], -0.75f, 1e-6f);
    EXPECT_NEAR(bwd.dk[1], 0.75f, 1e-6f);
    EXPECT_NEAR(bwd.dv[0], 0.25f, 1e-6f);
    EXPECT_NEAR(bwd.dv[1], 0.75f, 1e-6f);
  }
}

TEST(Flash, MatchesReferenceOnSquareShapes) {
  for (const int64_t n : {1, 7, 97, 257}) {
    for (const int64_t d : {1, 8, 64}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", d = " + std::to_string(d));
      const HeadShape shape{n, n, d, d};
      check_against_reference(random_inputs(shape, static_cast<uint64_t>(n * 100 + d)),
                              cache_sizes_for(shape));
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
    check_against_reference(random_inputs(shape, static_cast<uint64_t>(shape.seqlen_q * 7 + shape.seqlen_k)),
                            cache_sizes_for(shape));
  }
}

TEST(Flash, HandPickedTilesThatDoNotDivideTheSequences) {
  // Tiles the planner would not pick (partial tiles at both ends, inner larger than outer).
  const HeadShape shape{97, 61, 8, 8};
  const Inputs in = random_inputs(shape, 5);
  const ForwardOut a = run_forward(in, {5, 13, 0, 0}, 100000, nullptr);
  const ForwardOut b = run_forward(in, {97, 61, 0, 0}, 100000, nullptr);
  EXPECT_LE(max_abs_error(a.o, to_double(b.o)), fp32_tolerance(shape.head_dim + shape.seqlen_k, 1.0));
  const BackwardOut ga = run_backward(in, a, {3, 11, 7, 29}, 100000, nullptr);
  const BackwardOut gb = run_backward(in, a, {97, 61, 97, 61}, 100000, nullptr);
  const int64_t terms = shape.head_dim + shape.seqlen_q;
  EXPECT_LE(max_abs_error(ga.dq, to_double(gb.dq)), fp32_tolerance(terms, max_abs(to_double(gb.dq))));
  EXPECT_LE(max_abs_error(ga.dk, to_double(gb.dk)), fp32_tolerance(terms, max_abs(to_double(gb.dk))));
  EXPECT_LE(max_abs_error(ga.dv, to_double(gb.dv)), fp32_tolerance(terms, max_abs(to_double(gb.dv))));
}

TEST(Flash, NoKeysGivesZeroOutputMinusInfLseAndZeroGradients) {
  const HeadShape shape{7, 0, 8, 8};
  const Inputs in = random_inputs(shape, 1);
  const int64_t cache_words = flash_min_cache_words(shape, Pass::backward);
  const ForwardOut fwd = run_forward(in, flash_tiles(shape, cache_words, Pass::forward), cache_words, nullptr);
  for (const float value : fwd.o) EXPECT_EQ(value, 0.0f);
  for (const float value : fwd.lse) EXPECT_EQ(value, kNegInf);
  const BackwardOut bwd =
      run_backward(in, fwd, flash_tiles(shape, cache_words, Pass::backward), cache_words, nullptr);
  for (const float value : bwd.dq) EXPECT_EQ(value, 0.0f);
  for (const float value : bwd.delta) EXPECT_TRUE(std::isnan(value)) << "D is not needed, not written";
}

TEST(Flash, NoQueriesGivesZeroKeyGradients) {
  const HeadShape shape{0, 7, 8, 4};
  const Inputs in = random_inputs(shape, 2);
  const int64_t cache_words = 1000;
  const ForwardOut fwd = run_forward(in, flash_tiles(shape, cache_words, Pass::forward), cache_words, nullptr);
  EXPECT_TRUE(fwd.o.empty() && fwd.lse.empty());
  const BackwardOut bwd =
      run_backward(in, fwd, flash_tiles(shape, cache_words, Pass::backward), cache_words, nullptr);
  ASSERT_EQ(bwd.dk.size(), 56u);
  ASSERT_EQ(bwd.dv.size(), 28u);
  for (const float value : bwd.dk) EXPECT_EQ(value, 0.0f);
  for (const float value : bwd.dv) EXPECT_EQ(value, 0.0f);
}

TEST(Flash, MinusInfLseRowContributesNothing) {
  // A row the forward found empty (LSE = -inf; only a mask produces it, which the dense schedule
  // still has to survive in its backward): zero gradients from it, never NaN.
  const HeadShape shape{3, 5, 4, 4};
  const Inputs in = random_inputs(shape, 3);
  ForwardOut fwd = run_forward(in, {3, 5, 0, 0}, 1000, nullptr);
  fwd.lse[1] = kNegInf;
  for (int64_t x = 0; x < 4; ++x) fwd.o[static_cast<size_t>(4 + x)] = 0.0f;
  const BackwardOut bwd = run_backward(in, fwd, {2, 2, 2, 2}, 1000, nullptr);
  for (int64_t x = 0; x < 4; ++x) EXPECT_EQ(bwd.dq[static_cast<size_t>(4 + x)], 0.0f);
  for (const float value : bwd.dk) EXPECT_FALSE(std::isnan(value));
  for (const float value : bwd.dv) EXPECT_FALSE(std::isnan(value));
}

// ---- Refusals: each names the argument and the values, and nothing is written -----------------

std::string forward_error(Inputs in, HeadShape o_shape, const FlashTiles& tiles, float scale) {
  std::vector<float> o(static_cast<size_t>(o_shape.seqlen_q * o_shape.head_dim_v), kNan);
  std::vector<float> lse(static_cast<size_t>(in.shape.seqlen_q), kNan);
  const HeadShape& s = in.shape;
  HeadForward problem{slow_in(in.q, s.seqlen_q, s.head_dim), slow_in(in.k, s.seqlen_k, s.head_dim),
                      slow_in(in.v, s.seqlen_k, s.head_dim_v),
                      slow<float>(o, o_shape.seqlen_q, o_shape.head_dim_v),
                      slow<float>(lse, s.seqlen_q, 1), scale};
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
  const Inputs in = random_inputs({7, 5, 8, 16}, 1);
  EXPECT_EQ(forward_error(in, {7, 5, 8, 8}, {4, 4, 0, 0}, 1.0f),
            "flash forward: o is 7 x 8, expected 7 x 16 (seqlen_q x head_dim_v)");
}

TEST(FlashForward, RefusesNonPositiveTilesAndNonFiniteScale) {
  const Inputs in = random_inputs({7, 5, 8, 8}, 1);
  EXPECT_EQ(forward_error(in, in.shape, {0, 4, 0, 0}, 1.0f),
            "flash forward: tile block_q = 0 rows must be positive");
  EXPECT_THAT(forward_error(in, in.shape, {4, 4, 0, 0}, std::numeric_limits<float>::infinity()),
              HasSubstr("flash forward: scale = inf must be finite"));
}

TEST(FlashBackward, RefusesMisshapedGradientsAndTiles) {
  const Inputs in = random_inputs({7, 5, 8, 8}, 1);
  const ForwardOut fwd = run_forward(in, {4, 4, 0, 0}, 10000, nullptr);
  try {
    run_backward(in, fwd, {4, 4, 0, 4}, 10000, nullptr);
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_STREQ(error.what(), "flash backward: tile dkdv_block_q = 0 rows must be positive");
  }
  BackwardOut out;
  std::vector<float> dk(40, kNan);  // 4 rows where k has 5
  out.dq.assign(56, kNan);
  out.dv.assign(40, kNan);
  out.delta.assign(7, kNan);
  HeadBackward problem{slow_in(in.q, 7, 8), slow_in(in.k, 5, 8), slow_in(in.v, 5, 8),
                       slow_in(fwd.o, 7, 8), slow_in(fwd.lse, 7, 1), slow_in(in.d_o, 7, 8),
                       slow<float>(out.delta, 7, 1), slow<float>(out.dq, 7, 8),
                       slow<float>(dk, 4, 8), slow<float>(out.dv, 5, 8), in.scale};
  FastMemory fast(10000, nullptr, "flash backward");
  try {
    flash_backward(fast, problem, {4, 4, 4, 4});
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_STREQ(error.what(), "flash backward: dk is 4 x 8, expected 5 x 8 (seqlen_k x head_dim)");
  }
  for (const float value : out.dq) EXPECT_TRUE(std::isnan(value));
  for (const float value : out.delta) EXPECT_TRUE(std::isnan(value));
}

TEST(Flash, TilesTooLargeForTheFastMemoryAreRefusedByIt) {
  const Inputs in = random_inputs({64, 64, 8, 8}, 1);
  try {
    run_forward(in, {64, 64, 0, 0}, 1000, nullptr);
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::RuntimeError& error) {
    EXPECT_THAT(error.what(), HasSubstr("more than M = 1000"));
  }
}

}  // namespace
