// The avx512_bf16 kernels' bfloat16 pair products (cpu/kernels/flash_kernels.hpp, "bfloat16
// pairs"): which tiles are packed, the packing checked by hand, each step on packed tiles against
// an fp64 computation of the same products (the backward's P and dS rounded to bfloat16; float32
// outputs, so the pairs' own rounding shows) and unpacked ones against the avx512 set, and
// bfloat16 calls through the API within FlashAttention's rule, counted == predicted and with the
// same bits for any thread count, while float32 calls keep the avx512 set's bits. Skipped, saying
// why, where the CPU has no AVX512_BF16.
#include "support/half_precision_cpu.hpp"
#include "support/kernel_isas.hpp"

#include "cpu/kernels/flash_kernels.hpp"

#include <spattn/elements.hpp>
#include <spattn/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace kernels = spattn::schedules::flash_kernels;
using namespace spattn::testing::half_precision;
using kernels::KernelIsa;
using spattn::Algorithm;
using spattn::Mask;
using spattn_test::IsaGuard;
using ::testing::HasSubstr;

#define SKIP_WITHOUT_AVX512_BF16()                                                               \
  if (!kernels::kernel_isa_supported(KernelIsa::avx512_bf16))                                    \
  GTEST_SKIP() << "this CPU (or build) has no AVX512_BF16 (cpuid leaf 7.1, eax bit 5): the "     \
                  "avx512_bf16 kernels cannot run here"

uint32_t bf16_bits(float x) { return spattn::to_bfloat16(x).bits; }

TEST(Bf16PairProducts, OnlyTheAvx512Bf16SetPacksAndOnlyTilesOfAVectorOfRows) {
  SKIP_WITHOUT_AVX512_BF16();
  const IsaGuard guard;
  kernels::set_kernel_isa(KernelIsa::avx512);
  EXPECT_FALSE(kernels::packs_bf16_pairs(64, 64));
  kernels::set_kernel_isa(KernelIsa::avx512_bf16);
  EXPECT_STREQ(kernels::kernel_isa_name(KernelIsa::avx512_bf16), "avx512_bf16");
  EXPECT_TRUE(kernels::packs_bf16_pairs(16, 64));
  EXPECT_FALSE(kernels::packs_bf16_pairs(15, 64));  // the scalar steps take it
  EXPECT_TRUE(kernels::packs_bf16_pairs(64, kernels::kMaxPairWidth));
  EXPECT_FALSE(kernels::packs_bf16_pairs(64, kernels::kMaxPairWidth + 1));
  std::vector<float> tile(15 * 4, 1.0f);
  try {
    kernels::pack_bf16_pairs(tile.data(), 4, 15);
    FAIL() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("do not take a tile of 15 rows and width 4"));
  }
  EXPECT_EQ(tile, std::vector<float>(15 * 4, 1.0f)) << "a refused tile is left as it was";
}

TEST(Bf16PairProducts, PackingPutsEachPairOfHeadDimIntoOneWordInPlace) {
  SKIP_WITHOUT_AVX512_BF16();
  const IsaGuard guard;
  kernels::set_kernel_isa(KernelIsa::avx512_bf16);
  // (3, 17): an odd width and a row of 16 lanes plus one. Every value is a bfloat16.
  constexpr int64_t kWidth = 3, kRows = 17;
  auto value = [](int64_t x, int64_t r) {
    const float magnitude = static_cast<float>(x + 1) + 0.125f * static_cast<float>(r);
    return r % 2 == 1 ? -magnitude : magnitude;
  };
  std::vector<float> tile(kWidth * kRows);
  for (int64_t x = 0; x < kWidth; ++x) {
    for (int64_t r = 0; r < kRows; ++r) tile[x * kRows + r] = value(x, r);
  }
  const uint32_t* packed = kernels::pack_bf16_pairs(tile.data(), kWidth, kRows);
  ASSERT_EQ(static_cast<const void*>(packed), static_cast<const void*>(tile.data()));
  std::vector<uint32_t> pairs(2 * kRows);  // (the tile's bytes, read as the words they now are)
  std::memcpy(pairs.data(), tile.data(), pairs.size() * sizeof(uint32_t));
  // By hand: (x 0, r 0) = 1.0 = 0x3f80 low, (x 1, r 0) = 2.0 = 0x4000 high; (x 2, r 0) = 3.0 =
  // 0x4040 with nothing above it (the width is odd); (x 0, r 1) = -1.125 = 0xbf90, (x 1, r 1) =
  // -2.125 = 0xc008.
  EXPECT_EQ(pairs[0], 0x40003f80u);
  EXPECT_EQ(pairs[kRows], 0x00004040u);
  EXPECT_EQ(pairs[1], 0xc008bf90u);
  for (int64_t p = 0; p < 2; ++p) {
    for (int64_t r = 0; r < kRows; ++r) {
      const uint32_t high = 2 * p + 1 < kWidth ? bf16_bits(value(2 * p + 1, r)) : 0u;
      EXPECT_EQ(pairs[p * kRows + r], bf16_bits(value(2 * p, r)) | (high << 16)) << "pair " << p << ", row " << r;
    }
  }
}

// Random bfloat16 values in [-1, 1).
std::vector<float> bf16_values(int64_t count, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& x : values) x = spattn::to_float(spattn::to_bfloat16(uniform(engine)));
  return values;
}

// A partial tile's bits (o * stride + i), about half set, or none (a full tile).
std::vector<uint64_t> random_bits(int64_t rows_o, int64_t stride, bool partial, uint32_t seed) {
  if (!partial) return {};
  std::mt19937_64 engine(seed);
  std::vector<uint64_t> bits(static_cast<size_t>((rows_o * stride + 63) / 64));
  for (uint64_t& word : bits) word = engine();
  return bits;
}

// One set of bfloat16 tiles for the three steps: the outer ones (width, rows_outer) transposed, the
// inner ones (rows_inner, width), the statistics and a partial tile's bits.
struct StepShape {
  int64_t rows_outer, rows_inner, d, e;
  bool partial;
};
struct StepTiles {
  StepShape shape;
  std::vector<float> outer_d, outer_e, inner_d, inner_e, lse, delta;
  std::vector<uint64_t> bits;
  float scale;
  explicit StepTiles(const StepShape& sh)
      : shape(sh),
        outer_d(bf16_values(sh.d * sh.rows_outer, 1)),
        outer_e(bf16_values(sh.e * sh.rows_outer, 2)),
        inner_d(bf16_values(sh.rows_inner * sh.d, 3)),
        inner_e(bf16_values(sh.rows_inner * sh.e, 4)),
        lse(bf16_values(std::max(sh.rows_outer, sh.rows_inner), 5)),
        delta(bf16_values(std::max(sh.rows_outer, sh.rows_inner), 6)),
        bits(random_bits(sh.rows_outer, sh.rows_inner, sh.partial, 7)),
        scale(1.0f / std::sqrt(static_cast<float>(sh.d))) {}
  const uint64_t* bits_or_null() const { return shape.partial ? bits.data() : nullptr; }
  bool attends(int64_t o, int64_t i) const {
    if (!shape.partial) return true;
    const int64_t bit = o * shape.rows_inner + i;
    return ((bits[static_cast<size_t>(bit >> 6)] >> (bit & 63)) & 1u) != 0;
  }
};

// The three steps on the tiles, the outer ones as floats or packed as pairs; the float32 results
// in order: the forward's row_max, row_sum and acc, dQ, dK, dV.
std::vector<float> run_steps(const StepTiles& in, bool pairs) {
  const StepShape& sh = in.shape;
  const int64_t ro = sh.rows_outer, ri = sh.rows_inner, d = sh.d, e = sh.e;
  std::vector<float> results;
  // Each step packs its own copies (packing overwrites the floats).
  auto packed = [&](std::vector<float>& tile, int64_t width) {
    return pairs && kernels::pack_bf16_pairs(tile.data(), width, ro) != nullptr;
  };
  {
    std::vector<float> q_t = in.outer_d, s(ro * ri), row_max(ro, -INFINITY), row_sum(ro, 0.0f), acc(ro * e, 0.0f);
    kernels::ForwardTile t;
    t.q_t = q_t.data();
    t.q_packed = packed(q_t, d);
    t.k = in.inner_d.data();
    t.v = in.inner_e.data();
    t.rows_q = ro, t.rows_k = ri, t.d = d, t.e = e, t.scale = in.scale;
    t.bits = in.bits_or_null(), t.bit_stride = ri;
    t.s = s.data(), t.row_max = row_max.data(), t.row_sum = row_sum.data(), t.acc = acc.data();
    kernels::forward_tile(t);
    for (const auto* part : {&row_max, &row_sum, &acc}) results.insert(results.end(), part->begin(), part->end());
  }
  {
    std::vector<float> q_t = in.outer_d, do_t = in.outer_e, s(ro * ri), dq(ro * d, 0.0f);
    kernels::DqTile t;
    t.q_t = q_t.data(), t.do_t = do_t.data();
    t.q_packed = packed(q_t, d), t.do_packed = packed(do_t, e);
    t.lse = in.lse.data(), t.delta = in.delta.data();
    t.k = in.inner_d.data(), t.v = in.inner_e.data();
    t.rows_q = ro, t.rows_k = ri, t.d = d, t.e = e, t.scale = in.scale;
    t.bits = in.bits_or_null(), t.bit_stride = ri;
    t.s = s.data(), t.dq = dq.data();
    kernels::dq_tile(t);
    results.insert(results.end(), dq.begin(), dq.end());
  }
  {
    std::vector<float> k_t = in.outer_d, v_t = in.outer_e, s(ro * ri), dk(ro * d, 0.0f), dv(ro * e, 0.0f);
    kernels::DkdvTile t;
    t.k_t = k_t.data(), t.v_t = v_t.data();
    t.k_packed = packed(k_t, d), t.v_packed = packed(v_t, e);
    t.q = in.inner_d.data(), t.d_o = in.inner_e.data();
    t.lse = in.lse.data(), t.delta = in.delta.data();
    t.rows_k = ro, t.rows_q = ri, t.d = d, t.e = e, t.scale = in.scale;
    t.bits = in.bits_or_null(), t.bit_stride = ri;
    t.s = s.data(), t.dk = dk.data(), t.dv = dv.data();
    kernels::dkdv_tile(t);
    for (const auto* part : {&dk, &dv}) results.insert(results.end(), part->begin(), part->end());
  }
  return results;
}

// What the pair steps compute, in double, in run_steps' order: the weights of the backward's
// accumulating products (P, dS) rounded to bfloat16 as the pairs round them, everything else
// exact (the forward's P V stays float32). `slack`
// per result: float32's rounding of the sums (1e-5 sqrt(d + rows) of the terms' magnitudes, a dS
// term's magnitude being P (|dP| terms + |D|) where dP - D may cancel) plus two weights rounded
// to the neighbouring bfloat16 (float32's P or dS may sit on the other side of a midpoint).
struct Expected {
  std::vector<double> values, slack;
};
Expected reference_steps(const StepTiles& in) {
  const StepShape& sh = in.shape;
  const int64_t ro = sh.rows_outer, ri = sh.rows_inner, d = sh.d, e = sh.e;
  const double sum_slack = 1e-5 * std::sqrt(static_cast<double>(d + ri));
  const double neighbour = 2.0 * std::ldexp(1.0, -8);
  auto bf16 = [](double x) { return static_cast<double>(spattn::to_float(spattn::to_bfloat16(static_cast<float>(x)))); };
  // dot of row i of a (rows, width) row-major and column o of bt (width, ro); its |terms| sum.
  auto dot = [&](const std::vector<float>& a, const std::vector<float>& bt, int64_t width, int64_t i, int64_t o,
                 double* magnitude) {
    double sum = 0.0, size = 0.0;
    for (int64_t x = 0; x < width; ++x) {
      sum += static_cast<double>(a[i * width + x]) * bt[x * ro + o];
      size += std::fabs(static_cast<double>(a[i * width + x]) * bt[x * ro + o]);
    }
    if (magnitude != nullptr) *magnitude = size;
    return sum;
  };
  Expected out;
  // acc (ro, width) = sum_i bf16(w[i][o]) b[i][x] (w[i][o] itself unless `rounded`), w's magnitudes
  // `size`.
  auto accumulate = [&](const std::vector<double>& w, const std::vector<double>& size, const std::vector<float>& b,
                        int64_t width, bool rounded) {
    for (int64_t o = 0; o < ro; ++o) {
      for (int64_t x = 0; x < width; ++x) {
        double sum = 0.0, terms = 0.0, largest = 0.0;
        for (int64_t i = 0; i < ri; ++i) {
          sum += (rounded ? bf16(w[i * ro + o]) : w[i * ro + o]) * b[i * width + x];
          const double term = size[i * ro + o] * std::fabs(static_cast<double>(b[i * width + x]));
          terms += term;
          largest = std::max(largest, term);
        }
        out.values.push_back(sum);
        out.slack.push_back(sum_slack * (1.0 + terms) + (rounded ? neighbour * largest : 0.0));
      }
    }
  };
  // Forward: m, l and P = exp(S - m) per query o (outer); nothing attended: -inf, 0, 0.
  std::vector<double> p(ri * ro), p_size(ri * ro), ds(ri * ro), ds_size(ri * ro);
  std::vector<double> row_max(ro, -INFINITY), row_sum(ro, 0.0);
  for (int64_t o = 0; o < ro; ++o) {
    for (int64_t i = 0; i < ri; ++i) {
      if (in.attends(o, i)) row_max[o] = std::max(row_max[o], in.scale * dot(in.inner_d, in.outer_d, d, i, o, nullptr));
    }
    for (int64_t i = 0; i < ri; ++i) {
      const double value = in.attends(o, i) ? std::exp(in.scale * dot(in.inner_d, in.outer_d, d, i, o, nullptr) - row_max[o]) : 0.0;
      p[i * ro + o] = value;
      p_size[i * ro + o] = value;
      row_sum[o] += value;
    }
  }
  for (const auto* part : {&row_max, &row_sum}) {
    for (double x : *part) {
      out.values.push_back(x);
      out.slack.push_back(sum_slack * (1.0 + std::fabs(x)));
    }
  }
  accumulate(p, p_size, in.inner_e, e, false);
  // P = exp(scale S - LSE) and dS = P (dP - D), LSE and D per outer row (dQ) or inner row (dK/dV).
  auto gradients = [&](bool stats_on_inner) {
    for (int64_t o = 0; o < ro; ++o) {
      for (int64_t i = 0; i < ri; ++i) {
        const int64_t at = i * ro + o, row = stats_on_inner ? i : o;
        double dp_terms = 0.0;
        const double prob = in.attends(o, i) ? std::exp(in.scale * dot(in.inner_d, in.outer_d, d, i, o, nullptr) - static_cast<double>(in.lse[row])) : 0.0;
        const double dp = dot(in.inner_e, in.outer_e, e, i, o, &dp_terms);
        p[at] = prob;
        p_size[at] = prob;
        ds[at] = prob * (dp - static_cast<double>(in.delta[row]));
        ds_size[at] = prob * (dp_terms + std::fabs(static_cast<double>(in.delta[row])));
      }
    }
  };
  gradients(false);
  accumulate(ds, ds_size, in.inner_d, d, true);  // dQ = dS^T K
  gradients(true);
  accumulate(ds, ds_size, in.inner_d, d, true);  // dK = dS^T Q
  accumulate(p, p_size, in.inner_e, e, true);    // dV = P^T dO
  return out;
}

TEST(Bf16PairProducts, EachStepOnPairsComputesTheRoundedWeightsProducts) {
  SKIP_WITHOUT_AVX512_BF16();
  const IsaGuard guard;
  // Outer tiles of one vector and of a ragged number of them; head dims 1, odd, past one block of
  // 32 and unequal d, e; inner tiles of 1, 5 and more than one block of 8 rows; full and partial.
  const StepShape shapes[] = {{16, 1, 1, 1, false},    {16, 5, 7, 7, true},     {37, 13, 67, 40, false},
                              {37, 13, 67, 40, true},  {64, 64, 64, 64, true},  {33, 9, 128, 111, false},
                              {50, 20, 512, 64, true}};
  for (const StepShape& shape : shapes) {
    SCOPED_TRACE(std::to_string(shape.rows_outer) + " x " + std::to_string(shape.rows_inner) + ", d " +
                 std::to_string(shape.d) + ", e " + std::to_string(shape.e) + (shape.partial ? ", partial" : ""));
    const StepTiles tiles(shape);
    kernels::set_kernel_isa(KernelIsa::avx512);
    const std::vector<float> floats = run_steps(tiles, false);
    kernels::set_kernel_isa(KernelIsa::avx512_bf16);
    const std::vector<float> unpacked = run_steps(tiles, false);
    const std::vector<float> pairs = run_steps(tiles, true);
    EXPECT_TRUE(spattn::testing::same_bits(unpacked, floats)) << "unpacked tiles run the avx512 code";
    const Expected expected = reference_steps(tiles);
    ASSERT_EQ(pairs.size(), expected.values.size());
    int64_t outside = 0;
    double largest = 0.0;
    bool differs = false;
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (std::isinf(expected.values[i])) {  // row_max of a row with nothing attended
        EXPECT_EQ(pairs[i], -INFINITY) << i;
        continue;
      }
      const double error = std::fabs(static_cast<double>(pairs[i]) - expected.values[i]);
      if (error > expected.slack[i] && outside++ < 5) {
        ADD_FAILURE() << "result " << i << ": " << pairs[i] << " against " << expected.values[i] << ", slack "
                      << expected.slack[i];
      }
      largest = std::max(largest, std::fabs(expected.values[i]));
      differs = differs || pairs[i] != floats[i];
    }
    EXPECT_EQ(outside, 0);
    EXPECT_GT(largest, 0.1) << "the steps computed something";
    EXPECT_TRUE(differs) << "the pair products did not run";
  }
}

TEST(Bf16PairProducts, Bfloat16CallsOnPairsKeepTheRuleAndCountWhatTheyPredict) {
  SKIP_WITHOUT_AVX512_BF16();
  const IsaGuard guard;
  struct Case {
    int64_t heads, kv_heads, n_q, n_k, d;
    std::string spec;
  };
  const Case cases[] = {{1, 1, 257, 257, 64, "full"},
                        {1, 1, 257, 257, 111, "causal"},
                        {1, 1, 97, 97, 40, "sliding_window:w=5"},
                        {1, 1, 257, 257, 128, "bigbird:block=8,w=1,g=1,r=2,seed=3"},
                        {1, 1, 97, 97, 7, "random:p=0.2,seed=3"},
                        {4, 2, 97, 97, 40, "causal"},
                        {3, 1, 33, 41, 64, "sliding_window:w=5"},
                        {1, 1, 97, 97, 600, "full"}};  // wider than kMaxPairWidth: floats
  for (const Case& c : cases) {
    const Problem p = rounded<spattn::bfloat16_t>(make_problem(1, c.heads, c.kv_heads, c.n_q, c.n_k, c.d, c.d, 5));
    const std::vector<Mask> masks = {Mask::from_spec(c.spec, c.n_q, c.n_k)};
    const float scale = static_cast<float>(scale_of(p));
    const Truth truth_values = truth(p, masks, scale);
    const Outputs lazy = naive<spattn::bfloat16_t>(p, masks, scale);
    for (int64_t cache_words : {4096, 1 << 16}) {
      SCOPED_TRACE(c.spec + ", " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads, " +
                   std::to_string(c.n_q) + " x " + std::to_string(c.n_k) + ", d " + std::to_string(c.d) + ", M " +
                   std::to_string(cache_words));
      spattn::AttentionOptions options = options_for(Algorithm::flash);
      options.cache_words = cache_words;
      kernels::set_kernel_isa(KernelIsa::avx512_bf16);
      spattn::Plan forward, backward;
      const Outputs on_pairs = run_cpu<spattn::bfloat16_t>(p, masks, options, &forward, &backward);
      expect_half_precision_rule(p, masks, on_pairs, lazy, truth_values);
      kernels::set_kernel_isa(KernelIsa::avx512);
      const Outputs on_floats = run_cpu<spattn::bfloat16_t>(p, masks, options);
      // LSE is float32 and comes from the forward's score products alone, which the pairs sum in
      // another order: at the larger M every query tile here has a vector of rows or more, so
      // LSE shows whether they ran (they do not past kMaxPairWidth). With a short head dim both
      // orders sum the exact products exactly.
      if (cache_words == 1 << 16 && c.d >= 32) {
        EXPECT_EQ(!spattn::testing::same_bits(on_pairs.lse, on_floats.lse), c.d <= kernels::kMaxPairWidth)
            << forward.flash.tiles;
      }
    }
  }
  // The same bits for any thread count on pairs, as on floats.
  {
    const Problem p = rounded<spattn::bfloat16_t>(make_problem(1, 4, 2, 257, 257, 64, 64, 3));
    const std::vector<Mask> masks = {Mask::from_spec("causal", 257, 257)};
    kernels::set_kernel_isa(KernelIsa::avx512_bf16);
    spattn::AttentionOptions options = options_for(Algorithm::flash, 1);
    options.cache_words = 1 << 16;
    const Outputs one = run_cpu<spattn::bfloat16_t>(p, masks, options);
    options.threads = 3;
    const Outputs three = run_cpu<spattn::bfloat16_t>(p, masks, options);
    for (const auto& [x, y] : {std::pair{&one.o, &three.o}, std::pair{&one.lse, &three.lse},
                               std::pair{&one.dq, &three.dq}, std::pair{&one.dk, &three.dk},
                               std::pair{&one.dv, &three.dv}}) {
      EXPECT_TRUE(spattn::testing::same_bits(*x, *y)) << "1 thread against 3";
    }
  }
  // float32 calls are not packed: the same bits on both sets.
  const Problem p = make_problem(1, 2, 2, 97, 97, 64, 64, 9);
  const std::vector<Mask> masks = {Mask::from_spec("causal", 97, 97)};
  kernels::set_kernel_isa(KernelIsa::avx512_bf16);
  const Outputs a = run_cpu<float>(p, masks, options_for(Algorithm::flash));
  kernels::set_kernel_isa(KernelIsa::avx512);
  const Outputs b = run_cpu<float>(p, masks, options_for(Algorithm::flash));
  for (const auto& [x, y] : {std::pair{&a.o, &b.o}, std::pair{&a.lse, &b.lse}, std::pair{&a.dq, &b.dq},
                             std::pair{&a.dk, &b.dk}, std::pair{&a.dv, &b.dv}}) {
    EXPECT_TRUE(spattn::testing::same_bits(*x, *y));
  }
}

}  // namespace
