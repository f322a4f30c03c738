// One attention head for the tests of the schedules and kernels: random inputs from named seeds,
// outputs that start poisoned, the views the schedules take (HeadForward, HeadBackward), and the
// fp64 reference's results for a mask with the tolerance rule of compare.hpp.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "support/compare.hpp"
#include "support/test_helpers.hpp"

#include <spattn/reference.hpp>
#include <spattn/tensor.hpp>

#include <sparse_formats/csr.hpp>
#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace spattn::testing {

// One head, fp32, row-major. Inputs: q (seqlen_q, head_dim), k (seqlen_k, head_dim),
// v (seqlen_k, head_dim_v), d_o (seqlen_q, head_dim_v). Outputs: o (seqlen_q, head_dim_v),
// lse and delta (seqlen_q), dq, dk, dv of q's, k's and v's shapes.
struct HeadFixture {
  schedules::HeadShape shape;
  float scale = 1.0f;
  std::vector<float> q, k, v, d_o;
  std::vector<float> o, lse, delta, dq, dk, dv;

  static constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

  // q, k, v, dO uniform in [-1, 1) from the seeds seed, seed + 1, seed + 2, seed + 3 (random_floats),
  // then q times 3: scores of a few units, so the softmax is far from uniform. scale =
  // 1 / sqrt(head_dim) (1 when head_dim is 0). Every output starts at `poison`: NaN by default, so
  // a word the code under test never writes fails any comparison; a test that checks that nothing
  // was written passes a number it can compare with.
  explicit HeadFixture(const schedules::HeadShape& s, uint32_t seed = 1, float poison = kNan) : shape(s) {
    const int64_t m = s.seqlen_q, n = s.seqlen_k, d = s.head_dim, e = s.head_dim_v;
    scale = d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
    q = random_floats(m * d, seed);
    for (float& x : q) x *= 3.0f;
    k = random_floats(n * d, seed + 1);
    v = random_floats(n * e, seed + 2);
    d_o = random_floats(m * e, seed + 3);
    poison_outputs(poison);
  }

  void poison_outputs(float poison) {
    poison_forward(poison);
    poison_backward(poison);
  }
  // The forward's outputs, o and lse.
  void poison_forward(float poison) {
    o.assign(static_cast<size_t>(shape.seqlen_q * shape.head_dim_v), poison);
    lse.assign(static_cast<size_t>(shape.seqlen_q), poison);
  }
  // The backward's outputs, delta, dq, dk and dv (it reads o and lse).
  void poison_backward(float poison) {
    delta.assign(static_cast<size_t>(shape.seqlen_q), poison);
    dq.assign(static_cast<size_t>(shape.seqlen_q * shape.head_dim), poison);
    dk.assign(static_cast<size_t>(shape.seqlen_k * shape.head_dim), poison);
    dv.assign(static_cast<size_t>(shape.seqlen_k * shape.head_dim_v), poison);
  }

  // The schedules' views of this head's vectors, made on each call (a copy views its own).
  schedules::HeadForward forward() {
    const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
    return {in(q, m, d), in(k, n, d), in(v, n, e), out(o, m, e), out(lse, m, 1), scale};
  }
  schedules::HeadBackward backward() {
    const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
    return {in(q, m, d),      in(k, n, d),   in(v, n, e),   in(o, m, e),   in(lse, m, 1), in(d_o, m, e),
            out(delta, m, 1), out(dq, m, d), out(dk, n, d), out(dv, n, e), scale};
  }

  static io::SlowMatrix<const float> in(const std::vector<float>& x, int64_t rows, int64_t cols) {
    return io::SlowMatrix<const float>::dense(x.data(), rows, cols);
  }
  static io::SlowMatrix<float> out(std::vector<float>& x, int64_t rows, int64_t cols) {
    return io::SlowMatrix<float>::dense(x.data(), rows, cols);
  }
};

// The fp64 reference's outputs for one head.
struct HeadReference {
  reference::ForwardResult forward;
  reference::BackwardResult backward;
};

// The reference on the head's inputs (widened to fp64, the same scale) over `mask`.
template <typename Index>
HeadReference reference_of(const HeadFixture& head, const sparse_formats::CsrPatternView<Index>& mask) {
  const schedules::HeadShape& s = head.shape;
  const auto q = widen(head.q), k = widen(head.k), v = widen(head.v), d_o = widen(head.d_o);
  const auto view = [](const std::vector<double>& x, int64_t rows, int64_t cols) {
    return TensorView<const double>::matrix(x.data(), rows, cols);
  };
  const reference::MaskList<Index> masks{mask};
  const auto scale = static_cast<double>(head.scale);
  return {reference::forward<Index>(view(q, s.seqlen_q, s.head_dim), view(k, s.seqlen_k, s.head_dim),
                                    view(v, s.seqlen_k, s.head_dim_v), masks, scale),
          reference::backward<Index>(view(q, s.seqlen_q, s.head_dim), view(k, s.seqlen_k, s.head_dim),
                                     view(v, s.seqlen_k, s.head_dim_v), view(d_o, s.seqlen_q, s.head_dim_v),
                                     masks, scale)};
}

// The reference with every query attending every key.
inline HeadReference reference_of(const HeadFixture& head) {
  const auto all = sparse_formats::full_pattern<int32_t>(head.shape.seqlen_q, head.shape.seqlen_k);
  return reference_of(head, all.view());
}

// O and LSE within fp32_tolerance(terms, max |reference|) of the reference.
inline void expect_forward_near(const HeadFixture& head, const HeadReference& expected, int64_t terms) {
  EXPECT_LE(max_abs_error(head.o, expected.forward.o), fp32_tolerance(terms, max_abs(expected.forward.o)));
  EXPECT_LE(max_abs_error(head.lse, expected.forward.lse), fp32_tolerance(terms, max_abs(expected.forward.lse)));
}

// dQ, dK and dV within fp32_tolerance(terms, max |reference|) of the reference.
inline void expect_backward_near(const HeadFixture& head, const HeadReference& expected, int64_t terms) {
  EXPECT_LE(max_abs_error(head.dq, expected.backward.dq), fp32_tolerance(terms, max_abs(expected.backward.dq)));
  EXPECT_LE(max_abs_error(head.dk, expected.backward.dk), fp32_tolerance(terms, max_abs(expected.backward.dk)));
  EXPECT_LE(max_abs_error(head.dv, expected.backward.dv), fp32_tolerance(terms, max_abs(expected.backward.dv)));
}

// Outputs that carry signal: o, dq, dk and dv each reach |x| > 1e-2, and the LSE spreads over
// the rows by more than 0.5 (uniform attention would give log(seqlen_k) in every row).
inline void expect_nontrivial_outputs(const HeadFixture& head) {
  const auto nontrivial = [](const std::vector<float>& x) { return max_abs(widen(x)) > 1e-2; };
  EXPECT_TRUE(nontrivial(head.o));
  EXPECT_TRUE(nontrivial(head.dq));
  EXPECT_TRUE(nontrivial(head.dk));
  EXPECT_TRUE(nontrivial(head.dv));
  const auto [lo, hi] = std::minmax_element(head.lse.begin(), head.lse.end());
  EXPECT_GT(*hi - *lo, 0.5f);
}

// Every output of `a` equal to `b`'s, element for element (EXPECT_EQ, so a NaN left where nothing
// was written fails): delta aside, which only some schedules keep in slow memory.
inline void expect_equal_outputs(const HeadFixture& a, const HeadFixture& b) {
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

}  // namespace spattn::testing
