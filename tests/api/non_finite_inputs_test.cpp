// The non-finite policy (docs/api.md, "Non-finite values"): NaN and infinity in any input are
// refused before anything runs, by every algorithm, forward and backward, dense and sparse inputs,
// and by the reference; the message names the tensor and the element; no output is written. An
// LSE's -inf (a fully masked row) is accepted; its NaN or +inf is not.
#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>

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
