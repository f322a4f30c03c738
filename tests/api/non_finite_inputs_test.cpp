// The non-finite policy (docs/api.md, "Non-finite values"): NaN and infinity in any input are
// refused before anything runs, by every algorithm, forward and backward, dense and sparse inputs,
// and by the reference; the message names the tensor and the element; no output is written. An
// LSE's -inf (a fully masked row) is accepted; its NaN or +inf is not.
#include <spattn/attention.hpp>
#include <spattn/elements.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>

#include "reference/finite_values.hpp"
#include "support/api_problem.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::TensorView;
using spattn::testing::ApiProblem;
using spattn::testing::kAllAlgorithms;
using spattn::testing::options_for;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kSentinel = 12345.0f;

// Runs `call` and returns the InvalidArgument message ("" when nothing was thrown).
template <typename Call>
std::string refusal(Call&& call) {
  try {
    call();
  } catch (const spattn::InvalidArgument& error) {
    return error.what();
  }
  return "";
}

bool untouched(const std::vector<float>& output) {
  for (float value : output) {
    if (value != kSentinel) return false;
  }
  return true;
}

struct Case {
  const char* tensor;  // the input poisoned
  float value;
  const char* printed;
};
const Case kCases[] = {{"q", kNan, "nan"}, {"k", kInf, "inf"}, {"v", -kInf, "-inf"}};

}  // namespace

TEST(NonFiniteInputs, EveryAlgorithmRefusesThemInTheForwardNamingTheElement) {
  const Mask mask = Mask::from_spec("causal", 13, 13);
  for (const Algorithm algorithm : kAllAlgorithms) {
    for (const Case& c : kCases) {
      ApiProblem p(1, 2, 1, 13, 13, 4);
      std::vector<float>& poisoned = std::string(c.tensor) == "q" ? p.q : std::string(c.tensor) == "k" ? p.k : p.v;
      poisoned[4 * 5 + 2] = c.value;  // head 0, row 5, column 2
      std::vector<float> o(p.size(2, 13), kSentinel), lse(2 * 13, kSentinel);
      const std::string message = refusal([&] {
        spattn::attention_forward(p.in(p.q, 2, 13, 4), p.in(p.k, 1, 13, 4), p.in(p.v, 1, 13, 4), p.out(o, 2, 13, 4),
                                  p.out(lse, 2, 13, 1), mask, options_for(algorithm));
      });
      const std::string expected = std::string(c.tensor) + "[0, 0, 5, 2] = " + c.printed + " is not finite";
      EXPECT_NE(message.find(expected), std::string::npos) << spattn::algorithm_name(algorithm) << ": " << message;
      EXPECT_TRUE(untouched(o) && untouched(lse)) << spattn::algorithm_name(algorithm);
    }
  }
}

TEST(NonFiniteInputs, EveryAlgorithmRefusesThemInTheBackwardAndAcceptsAMaskedRowsLse) {
  // Row 0 attends nothing: its LSE is -inf, which the backward accepts.
  sparse_formats::CsrPattern<int64_t> pattern(7, 7, {0, 0, 1, 3, 4, 5, 6, 7}, {0, 0, 1, 2, 3, 4, 5});
  const Mask mask = Mask::from_csr(std::move(pattern), "mask");
  for (const Algorithm algorithm : kAllAlgorithms) {
    ApiProblem p(1, 1, 1, 7, 7, 3);
    p.run({mask}, options_for(algorithm));
    ASSERT_TRUE(std::isinf(p.lse[0]) && p.lse[0] < 0) << spattn::algorithm_name(algorithm);
    for (const auto& [name, value] : {std::pair<const char*, float>{"d_o", kNan}, {"o", kInf}, {"lse", kNan},
                                      {"lse", kInf}, {"q", -kInf}}) {
      ApiProblem bad = p;
      std::vector<float>& poisoned = std::string(name) == "d_o" ? bad.d_o
                                     : std::string(name) == "o" ? bad.o
                                     : std::string(name) == "q" ? bad.q
                                                                : bad.lse;
      poisoned[std::string(name) == "lse" ? 3 : 3 * 3 + 1] = value;
      std::vector<float> dq(bad.size(1, 7), kSentinel), dk = dq, dv = dq;
      const std::string message = refusal([&] {
        spattn::attention_backward(bad.in(bad.q, 1, 7, 3), bad.in(bad.k, 1, 7, 3), bad.in(bad.v, 1, 7, 3),
                                   bad.in(bad.o, 1, 7, 3), bad.in(bad.lse, 1, 7, 1), bad.in(bad.d_o, 1, 7, 3),
                                   bad.out(dq, 1, 7, 3), bad.out(dk, 1, 7, 3), bad.out(dv, 1, 7, 3), mask,
                                   options_for(algorithm));
      });
      const std::string element = std::string(name) == "lse" ? "[0, 0, 3, 0]" : "[0, 0, 3, 1]";
      EXPECT_NE(message.find(std::string(name) + element), std::string::npos)
          << spattn::algorithm_name(algorithm) << " " << name << ": " << message;
      EXPECT_TRUE(untouched(dq) && untouched(dk) && untouched(dv)) << spattn::algorithm_name(algorithm) << " " << name;
    }
  }
}

TEST(NonFiniteInputs, SparseInputsAndTheReferenceFollowTheSamePolicy) {
  // Dense entries of the sparse-input API.
  std::vector<float> q(5 * 3, 0.25f), k = q, v = q, o(5 * 3, kSentinel), lse(5, kSentinel);
  k[7] = kNan;
  const spattn::AttentionInputs inputs{spattn::AttentionInput::dense(TensorView<const float>::matrix(q.data(), 5, 3)),
                                       spattn::AttentionInput::dense(TensorView<const float>::matrix(k.data(), 5, 3)),
                                       spattn::AttentionInput::dense(TensorView<const float>::matrix(v.data(), 5, 3))};
  const Mask mask = Mask::full(5, 5);
  for (const Algorithm algorithm : kAllAlgorithms) {
    const std::string message = refusal([&] {
      spattn::attention_forward(inputs, TensorView<float>::matrix(o.data(), 5, 3),
                                TensorView<float>::matrix(lse.data(), 5, 1), mask, options_for(algorithm));
    });
    EXPECT_NE(message.find("k[0, 0, 2, 1] = nan is not finite"), std::string::npos) << message;
    EXPECT_TRUE(untouched(o) && untouched(lse));
  }
  // The fp64 reference's own entry point.
  std::vector<double> qd(5 * 3, 0.5), kd = qd, vd = qd;
  vd[14] = std::numeric_limits<double>::infinity();
  const auto view = [](const std::vector<double>& x) { return TensorView<const double>::matrix(x.data(), 5, 3); };
  const auto full = sparse_formats::CsrPattern<int64_t>(5, 5, {0, 5, 10, 15, 20, 25},
                                                        {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4,
                                                         0, 1, 2, 3, 4});
  const std::string message = refusal([&] {
    spattn::reference::forward<int64_t>(view(qd), view(kd), view(vd), {full.view()}, 1.0);
  });
  EXPECT_NE(message.find("v[0, 0, 4, 2] = inf is not finite"), std::string::npos) << message;
}

namespace {

// The bit test the scan runs on every row (reference/finite_values.hpp), for each element type:
// NaN and both infinities are found wherever they sit in a row, finite extremes are not.
template <typename T>
void expect_the_row_test_finds_exactly_the_non_finite(const std::vector<float>& finite,
                                                       const std::vector<float>& non_finite) {
  for (const float value : finite) {
    std::vector<T> row(37, spattn::from_float<T>(0.5f));
    row[36] = spattn::from_float<T>(value);
    EXPECT_FALSE(spattn::reference::row_has_non_finite_bits(row.data(), 37, 1)) << value;
  }
  for (const float value : non_finite) {
    for (const int64_t at : {0, 17, 36}) {
      std::vector<T> row(37, spattn::from_float<T>(0.5f));
      row[static_cast<size_t>(at)] = spattn::from_float<T>(value);
      EXPECT_TRUE(spattn::reference::row_has_non_finite_bits(row.data(), 37, 1)) << value << " at " << at;
      // A stride that steps over it does not see it; one that lands on it does.
      EXPECT_EQ(spattn::reference::row_has_non_finite_bits(row.data(), 37 / 2 + 1, 2), at % 2 == 0) << value;
    }
  }
}

}  // namespace

TEST(NonFiniteInputs, TheRowBitTestFindsNanAndInfinityInEveryElementType) {
  const std::vector<float> non_finite = {kNan, kInf, -kInf, -kNan};
  const std::vector<float> common = {0.0f, -0.0f, 1.0f, -2.5f};
  std::vector<float> for_float = common;
  for (const float extreme : {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                              std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()}) {
    for_float.push_back(extreme);
  }
  expect_the_row_test_finds_exactly_the_non_finite<float>(for_float, non_finite);
  std::vector<float> for_bfloat16 = common;
  for_bfloat16.push_back(3.38e38f);  // the largest finite bfloat16
  expect_the_row_test_finds_exactly_the_non_finite<spattn::bfloat16_t>(for_bfloat16, non_finite);
  std::vector<float> for_half = common;
  for_half.push_back(65504.0f);  // the largest finite half
  for_half.push_back(6.0e-8f);   // a half subnormal
  expect_the_row_test_finds_exactly_the_non_finite<spattn::half_t>(for_half, non_finite);
  std::vector<double> row(9, 0.25);
  EXPECT_FALSE(spattn::reference::row_has_non_finite_bits(row.data(), 9, 1));
  row[8] = std::numeric_limits<double>::max();
  EXPECT_FALSE(spattn::reference::row_has_non_finite_bits(row.data(), 9, 1));
  row[4] = -std::numeric_limits<double>::infinity();
  EXPECT_TRUE(spattn::reference::row_has_non_finite_bits(row.data(), 9, 1));
}

TEST(NonFiniteInputs, LargeInputsScannedOnSeveralThreadsNameTheFirstElementOfTheFirstTensor) {
  // 2 heads x 2048 rows x 64: 786432 elements in q, k and v, enough for the scan to split its rows
  // over the threads. q's poison sits in the last worker's share, k's in the first's: q's is named,
  // and of q's two the earlier, whatever the thread count.
  const Mask mask = Mask::from_spec("causal", 2048, 2048);
  ApiProblem p(1, 2, 2, 2048, 2048, 64);
  p.q[(1 * 2048 + 2000) * 64 + 7] = kNan;   // q[0, 1, 2000, 7]
  p.q[(1 * 2048 + 1999) * 64 + 63] = kInf;  // q[0, 1, 1999, 63]: the first
  p.k[(0 * 2048 + 3) * 64 + 0] = -kInf;     // k[0, 0, 3, 0]
  for (const int threads : {1, 2, 3}) {
    AttentionOptions options;
    options.threads = threads;
    std::vector<float> o(p.size(2, 2048), kSentinel), lse(2 * 2048, kSentinel);
    const std::string message = refusal([&] {
      spattn::attention_forward(p.in(p.q, 2, 2048, 64), p.in(p.k, 2, 2048, 64), p.in(p.v, 2, 2048, 64),
                                p.out(o, 2, 2048, 64), p.out(lse, 2, 2048, 1), mask, options);
    });
    EXPECT_NE(message.find("q[0, 1, 1999, 63] = inf is not finite"), std::string::npos) << threads << ": " << message;
    EXPECT_TRUE(untouched(o) && untouched(lse)) << threads;
  }

  // The backward: an LSE's -inf passes the split scan too; d_o's NaN, after it in order, is named.
  ApiProblem clean(1, 2, 2, 2048, 2048, 64);
  clean.o = clean.d_o;
  clean.lse.assign(2 * 2048, 1.0f);
  clean.lse[2048 + 1500] = -kInf;
  clean.d_o[(1 * 2048 + 2047) * 64 + 1] = kNan;
  for (const int threads : {1, 2, 3}) {
    AttentionOptions options;
    options.threads = threads;
    std::vector<float> dq(clean.size(2, 2048), kSentinel), dk = dq, dv = dq;
    const std::string message = refusal([&] {
      spattn::attention_backward(clean.in(clean.q, 2, 2048, 64), clean.in(clean.k, 2, 2048, 64),
                                 clean.in(clean.v, 2, 2048, 64), clean.in(clean.o, 2, 2048, 64),
                                 clean.in(clean.lse, 2, 2048, 1), clean.in(clean.d_o, 2, 2048, 64),
                                 clean.out(dq, 2, 2048, 64), clean.out(dk, 2, 2048, 64), clean.out(dv, 2, 2048, 64),
                                 mask, options);
    });
    EXPECT_NE(message.find("d_o[0, 1, 2047, 1] = nan is not finite"), std::string::npos) << threads << ": " << message;
    EXPECT_TRUE(untouched(dq) && untouched(dk) && untouched(dv)) << threads;
  }
}

TEST(NonFiniteInputs, LargeBfloat16InputsScannedOnSeveralThreadsAreRefusedByName) {
  const int64_t n = 4096, d = 64;
  std::vector<spattn::bfloat16_t> q(static_cast<size_t>(n * d), spattn::from_float<spattn::bfloat16_t>(0.25f));
  std::vector<spattn::bfloat16_t> k = q, v = q;
  v[static_cast<size_t>(4000 * d + 9)] = spattn::from_float<spattn::bfloat16_t>(kNan);
  std::vector<spattn::bfloat16_t> o(static_cast<size_t>(n * d), spattn::from_float<spattn::bfloat16_t>(kSentinel));
  std::vector<float> lse(static_cast<size_t>(n), kSentinel);
  AttentionOptions options;
  options.threads = 2;
  const auto in = [&](const std::vector<spattn::bfloat16_t>& x) {
    return TensorView<const spattn::bfloat16_t>::matrix(x.data(), n, d);
  };
  const std::string message = refusal([&] {
    spattn::attention_forward(in(q), in(k), in(v), TensorView<spattn::bfloat16_t>::matrix(o.data(), n, d),
                              TensorView<float>::matrix(lse.data(), n, 1), Mask::from_spec("causal", n, n), options);
  });
  EXPECT_NE(message.find("v[0, 0, 4000, 9] = nan is not finite"), std::string::npos) << message;
  EXPECT_TRUE(untouched(lse));
}
