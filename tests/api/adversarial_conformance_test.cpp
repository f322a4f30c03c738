// The adversarial conformance cases, every algorithm, forward and backward, against the fp64
// reference: per-head masks that differ inside a grouped-query group (a head given another's mask
// fails), a fully masked head, a mask whose rows are all empty but one, one query against a long
// key sequence and the reverse, head dims 1 and 0, strides with gaps (bit for bit the contiguous
// result), and outputs that overlap themselves, each other or an input (refused by name).
#include <spattn/attention.hpp>
#include <spattn/error.hpp>

#include "support/api_problem.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
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

Mask from_rows(int64_t n_q, int64_t n_k, const std::vector<std::vector<int64_t>>& rows) {
  sparse_formats::CsrPattern<int64_t> pattern(n_q, n_k, {0}, {});
  for (const auto& row : rows) {
    pattern.col_idx.insert(pattern.col_idx.end(), row.begin(), row.end());
    pattern.row_ptr.push_back(static_cast<int64_t>(pattern.col_idx.size()));
  }
  return Mask::from_csr(std::move(pattern), "mask");
}

// Forward and backward of `p` over `masks` with every algorithm, each against the reference.
void expect_conformance(ApiProblem p, const std::vector<Mask>& masks) {
  for (const Algorithm algorithm : kAllAlgorithms) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    p.run(masks, options_for(algorithm));
    p.expect_matches_reference(masks);
  }
}

std::string refusal(const std::function<void()>& call) {  // "" when nothing was refused
  try {
    call();
  } catch (const spattn::InvalidArgument& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST(AdversarialConformance, PerHeadMasksThatDifferInsideAGroupedQueryGroup) {
  const int64_t n = 37;
  // Two kv heads, two query heads each; no two masks alike, so a head run with a neighbour's mask
  // (or the group's first) disagrees with the reference.
  const std::vector<Mask> masks = {Mask::from_spec("causal", n, n), Mask::from_spec("sliding_window:w=2", n, n),
                                   Mask::from_spec("random:p=0.3,seed=9", n, n), Mask::full(n, n)};
  expect_conformance(ApiProblem(2, 4, 2, n, n, 8), masks);
  ApiProblem p(1, 4, 2, n, n, 8);
  p.run(masks, options_for(Algorithm::flash));
  const std::vector<float> right = p.o;
  p.run({masks[1], masks[0], masks[2], masks[3]}, options_for(Algorithm::flash));  // heads 0 and 1 swapped
  EXPECT_NE(right, p.o);
}

TEST(AdversarialConformance, AFullyMaskedHeadHasZeroOutputMinusInfinityLseAndNoGradient) {
  const int64_t n = 29;
  const Mask empty = from_rows(n, n, std::vector<std::vector<int64_t>>(static_cast<size_t>(n)));
  const std::vector<Mask> masks = {Mask::from_spec("causal", n, n), empty};
  expect_conformance(ApiProblem(1, 2, 1, n, n, 5), masks);
  for (const Algorithm algorithm : kAllAlgorithms) {
    ApiProblem p(1, 2, 1, n, n, 5);
    p.run(masks, options_for(algorithm));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_TRUE(std::isinf(p.lse[static_cast<size_t>(n + i)]) && p.lse[static_cast<size_t>(n + i)] < 0);
      for (int64_t c = 0; c < 5; ++c) {
        EXPECT_EQ(p.o[static_cast<size_t>((n + i) * 5 + c)], 0.0f);
        EXPECT_EQ(p.dq[static_cast<size_t>((n + i) * 5 + c)], 0.0f);
      }
    }
  }
}

TEST(AdversarialConformance, AMaskWhoseRowsAreAllEmptyButOne) {
  const int64_t n_q = 41, n_k = 23;
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(n_q));
  rows[17] = {0, 4, 5, 22};
  expect_conformance(ApiProblem(2, 2, 2, n_q, n_k, 6), {from_rows(n_q, n_k, rows)});
}

TEST(AdversarialConformance, OneQueryAgainstALongKeySequenceAndTheReverse) {
  expect_conformance(ApiProblem(1, 2, 1, 1, 257, 16), {Mask::full(1, 257)});
  expect_conformance(ApiProblem(1, 2, 1, 1, 257, 16), {Mask::from_spec("causal", 1, 257)});
  expect_conformance(ApiProblem(1, 2, 1, 257, 1, 16), {Mask::full(257, 1)});
  expect_conformance(ApiProblem(1, 2, 1, 257, 1, 16), {Mask::from_spec("causal", 257, 1)});
}

TEST(AdversarialConformance, HeadDimsOneAndZero) {
  expect_conformance(ApiProblem(1, 2, 2, 19, 19, 1), {Mask::from_spec("sliding_window:w=3", 19, 19)});
  // head_dim 0: every score is 0, so each attended key weighs the same; the outputs are empty and
  // the LSE is log(attended keys).
  for (const Algorithm algorithm : kAllAlgorithms) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    ApiProblem p(1, 1, 1, 7, 7, 0);
    p.run({Mask::from_spec("causal", 7, 7)}, options_for(algorithm));
    for (int64_t i = 0; i < 7; ++i) EXPECT_NEAR(p.lse[static_cast<size_t>(i)], std::log(static_cast<double>(i + 1)), 1e-6);
  }
}

TEST(AdversarialConformance, StridesWithGapsGiveTheContiguousBits) {
  const int64_t heads = 2, n = 31, d = 6, pad = 3;
  for (const Algorithm algorithm : kAllAlgorithms) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    ApiProblem p(1, heads, heads, n, n, d);
    const Mask mask = Mask::from_spec("random:p=0.4,seed=2", n, n);
    p.run({mask}, options_for(algorithm));
    // q and o with padded rows, in (seqlen, heads, dim) order: gaps between rows and heads.
    std::vector<float> q_padded(static_cast<size_t>(n * heads * (d + pad)), 99.0f), o_padded = q_padded;
    const std::array<int64_t, 4> shape{1, heads, n, d}, stride{n * heads * (d + pad), d + pad, heads * (d + pad), 1};
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < d; ++c) q_padded[static_cast<size_t>(h * (d + pad) + i * heads * (d + pad) + c)] = p.q[static_cast<size_t>((h * n + i) * d + c)];
      }
    }
    std::vector<float> lse(static_cast<size_t>(heads * n));
    spattn::attention_forward(TensorView<const float>{q_padded.data(), shape, stride}, p.in(p.k, heads, n, d),
                              p.in(p.v, heads, n, d), TensorView<float>{o_padded.data(), shape, stride},
                              p.out(lse, heads, n, 1), mask, options_for(algorithm));
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t c = 0; c < d; ++c) {
          ASSERT_EQ(o_padded[static_cast<size_t>(h * (d + pad) + i * heads * (d + pad) + c)], p.o[static_cast<size_t>((h * n + i) * d + c)]);
        }
        for (int64_t c = d; c < d + pad; ++c) ASSERT_EQ(o_padded[static_cast<size_t>(h * (d + pad) + i * heads * (d + pad) + c)], 99.0f);  // gaps untouched
      }
    }
  }
}

TEST(AdversarialConformance, OverlappingOutputsAreRefusedByName) {
  const int64_t n = 9, d = 4;
  ApiProblem p(1, 1, 1, n, n, d);
  const Mask mask = Mask::from_spec("causal", n, n);
  std::vector<float> o(static_cast<size_t>(n * d)), lse(static_cast<size_t>(n)), shared(static_cast<size_t>(3 * n * d));
  const auto q = p.in(p.q, 1, n, d), k = p.in(p.k, 1, n, d), v = p.in(p.v, 1, n, d);
  const TensorView<float> rows_on_one_row{o.data(), {1, 1, n, d}, {n * d, n * d, 0, 1}};  // every row at one address
  for (const Algorithm algorithm : kAllAlgorithms) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    std::string message = refusal([&] {
      spattn::attention_forward(q, k, v, rows_on_one_row, p.out(lse, 1, n, 1), mask, options_for(algorithm));
    });
    EXPECT_NE(message.find("o's strides (36, 36, 0, 1) map two of its elements to one address"), std::string::npos) << message;
    message = refusal([&] {  // o written over q
      spattn::attention_forward(q, k, v, TensorView<float>::contiguous(p.q.data(), 1, 1, n, d), p.out(lse, 1, n, 1),
                                mask, options_for(algorithm));
    });
    EXPECT_NE(message.find("o shares memory with q"), std::string::npos) << message;
    std::vector<float> q_copy = p.q;
    p.run({mask}, options_for(algorithm));
    EXPECT_EQ(p.q, q_copy);
    message = refusal([&] {  // dk over the second half of dq's memory
      spattn::attention_backward(q, k, v, p.in(p.o, 1, n, d), p.in(p.lse, 1, n, 1), p.in(p.d_o, 1, n, d),
                                 TensorView<float>::contiguous(shared.data(), 1, 1, n, d),
                                 TensorView<float>::contiguous(shared.data() + n * d / 2, 1, 1, n, d),
                                 TensorView<float>::contiguous(shared.data() + 2 * n * d, 1, 1, n, d), mask,
                                 options_for(algorithm));
    });
    EXPECT_NE(message.find("dq shares memory with dk"), std::string::npos) << message;
  }
}
