// The flash kernels (src/schedules/flash_kernels*.{hpp,cpp}): every instruction set this CPU
// supports agrees with the fp64 reference over shapes that hit each code path (tiles narrower
// than a vector, chunks that overlap the one before, head dims that are not a multiple of the
// lanes or of the partial sums, partial mask tiles), and the lane-wise exp is exact where the
// schedule needs it to be (exp(-inf) = 0, exp(0) = 1) and within 2 ulp elsewhere; so is the
// density-adaptive schedule's scalar exp, within 0.51 ulp.
#include <spattn/attention.hpp>
#include <spattn/reference.hpp>

#include "cpu/kernels/flash_kernels.hpp"
#include "cpu/kernels/scalar_exp.hpp"
#include "support/compare.hpp"
#include "support/head_fixture.hpp"
#include "support/kernel_isas.hpp"

#define SPATTN_KERNEL_NAMESPACE kernels_under_test
#include "cpu/kernels/flash_kernels_lanes.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::TensorView;
using spattn::schedules::flash_kernels::KernelIsa;
using ::testing::HasSubstr;

namespace {

namespace kernels = spattn::schedules::flash_kernels;

using spattn::testing::HeadFixture;
using spattn_test::IsaGuard;
using spattn_test::supported_isas;

struct Shape {
  int64_t n;
  int64_t d;
  int64_t cache_words;
};

// Runs flash forward + backward on one head through the API and compares every output with the
// reference.
void check_against_reference(const Shape& shape, const Mask& mask) {
  const int64_t n = shape.n, d = shape.d;
  HeadFixture head(spattn::schedules::HeadShape{n, n, d, d});
  auto in = [&](const std::vector<float>& x, int64_t last) { return TensorView<const float>::matrix(x.data(), n, last); };
  auto out = [&](std::vector<float>& x, int64_t last) { return TensorView<float>::matrix(x.data(), n, last); };
  AttentionOptions options;
  options.algorithm = Algorithm::flash;
  options.cache_words = shape.cache_words;
  options.threads = 2;
  spattn::attention_forward(in(head.q, d), in(head.k, d), in(head.v, d), out(head.o, d), out(head.lse, 1), mask,
                            options);
  spattn::attention_backward(in(head.q, d), in(head.k, d), in(head.v, d), in(head.o, d), in(head.lse, 1),
                             in(head.d_o, d), out(head.dq, d), out(head.dk, d), out(head.dv, d), mask, options);

  const auto expected = spattn::testing::reference_of(head, mask.csr());
  const double tolerance = spattn::testing::fp32_tolerance(d + n, 1.0);
  EXPECT_LE(spattn::testing::max_abs_error(head.o, expected.forward.o), tolerance);
  EXPECT_LE(spattn::testing::max_abs_error(head.lse, expected.forward.lse), tolerance);
  EXPECT_LE(spattn::testing::max_abs_error(head.dq, expected.backward.dq), tolerance);
  EXPECT_LE(spattn::testing::max_abs_error(head.dk, expected.backward.dk), tolerance);
  EXPECT_LE(spattn::testing::max_abs_error(head.dv, expected.backward.dv), tolerance);
  if (n > 1) {  // with one key, dK = 0
    EXPECT_GT(spattn::testing::max_abs(spattn::testing::widen(head.dk)), 1e-4);
  }
}

}  // namespace

TEST(FlashKernels, EverySupportedInstructionSetMatchesTheReference) {
  // n from 1 (scalar tiles) to 257; head dims 1, 7 and 72 leave lane and partial-sum remainders;
  // the cache sizes make outer tiles of a few rows up to the whole sequence.
  const std::vector<Shape> shapes = {{1, 1, 64},    {7, 7, 200},    {17, 16, 600}, {40, 24, 1200},
                                     {97, 7, 400},  {97, 72, 6000}, {130, 16, 12288}, {257, 32, 4000}};
  const IsaGuard guard;
  for (KernelIsa isa : supported_isas()) {
    kernels::set_kernel_isa(isa);
    for (const Shape& shape : shapes) {
      for (const std::string spec : {"full", "causal", "sliding_window:w=5", "random:p=0.2,seed=9"}) {
        SCOPED_TRACE(std::string(kernels::kernel_isa_name(isa)) + " " + spec + " n " + std::to_string(shape.n) +
                     " d " + std::to_string(shape.d) + " M " + std::to_string(shape.cache_words));
        check_against_reference(shape, Mask::from_spec(spec, shape.n, shape.n));
      }
    }
  }
}

TEST(FlashKernels, ThePortableSetIsAlwaysThereAndUnsupportedSetsAreRefused) {
  EXPECT_TRUE(kernels::kernel_isa_supported(KernelIsa::portable));
  EXPECT_STREQ(kernels::kernel_isa_name(KernelIsa::avx512), "avx512");
  const IsaGuard guard;
  for (KernelIsa isa : {KernelIsa::avx2, KernelIsa::avx512, KernelIsa::avx512_bf16}) {
    if (kernels::kernel_isa_supported(isa)) continue;
    try {
      kernels::set_kernel_isa(isa);
      FAIL() << "expected an error";
    } catch (const spattn::InvalidArgument& error) {
      EXPECT_THAT(error.what(), HasSubstr("does not support the"));
    }
  }
  kernels::set_kernel_isa(KernelIsa::portable);
  EXPECT_EQ(kernels::kernel_isa(), KernelIsa::portable);
}

// The worst error of an exp over x = first, first + step, ... below last, in units in the last
// place of the float nearest the exact value, and where it occurs.
struct WorstUlps {
  float ulps = 0.0f;
  float x = 0.0f;
};
template <typename Exp>
WorstUlps worst_ulps_of(Exp exp, float first, float last, float step) {
  WorstUlps worst;
  for (float x = first; x < last; x += step) {
    const double exact = std::exp(static_cast<double>(x));
    const auto rounded = static_cast<float>(exact);
    const double ulp = std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded;
    const auto ulps = static_cast<float>(std::fabs(exp(x) - exact) / ulp);
    if (ulps > worst.ulps) worst = {ulps, x};
  }
  return worst;
}

TEST(FlashKernels, LaneExpIsExactAtMinusInfinityAndZeroAndWithinTwoUlpElsewhere) {
  using kernels::kernels_under_test::exp_lanes;
  using kernels::kernels_under_test::Lanes1;
  EXPECT_EQ(exp_lanes<Lanes1>(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_lanes<Lanes1>(-88.0f), 0.0f);
  EXPECT_EQ(exp_lanes<Lanes1>(0.0f), 1.0f);
  const WorstUlps worst = worst_ulps_of([](float x) { return exp_lanes<Lanes1>(x); }, -86.9f, 88.0f, 0.0137f);
  EXPECT_LE(worst.ulps, 2.0f) << "at x = " << worst.x;
#if defined(__GNUC__)
  using kernels::kernels_under_test::Lanes4;
  const float in[4] = {-1.0f, 0.0f, 2.5f, -std::numeric_limits<float>::infinity()};
  Lanes4::V lanes;
  std::memcpy(&lanes, in, sizeof lanes);
  const Lanes4::V result = exp_lanes<Lanes4>(lanes);
  float out[4];
  std::memcpy(out, &result, sizeof out);
  for (int l = 0; l < 4; ++l) EXPECT_EQ(out[l], exp_lanes<Lanes1>(in[l])) << l;
#endif
}

// Over every float argument the worst is 0.5012 ulp (x = -0.981288); the sweep here crosses every
// binade of the result, subnormal ones included, and a polynomial of one degree less or ln 2 to a
// float's precision alone exceeds 0.51 ulp on it.
TEST(FlashKernels, ScalarExpIsExactAtMinusInfinityAndZeroAndNearlyCorrectlyRounded) {
  using spattn::schedules::scalar_exp;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(scalar_exp(-kInf), 0.0f);
  EXPECT_EQ(scalar_exp(-104.5f), 0.0f);
  EXPECT_EQ(scalar_exp(0.0f), 1.0f);
  EXPECT_EQ(scalar_exp(-0.0f), 1.0f);
  EXPECT_EQ(scalar_exp(89.0f), kInf);
  EXPECT_EQ(scalar_exp(kInf), kInf);
  EXPECT_TRUE(std::isnan(scalar_exp(std::numeric_limits<float>::quiet_NaN())));
  const auto* constants = &spattn::schedules::scalar_exp_detail::kScalarExpConstants;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(constants) % 64, 0u) << "they must take one line";
  const WorstUlps worst = worst_ulps_of(scalar_exp, -104.0f, 88.7f, 0.00731f);
  EXPECT_LE(worst.ulps, 0.51f) << "at x = " << worst.x;
  EXPECT_GT(worst.ulps, 0.3f) << "the sweep compares nothing";
}
