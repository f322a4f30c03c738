// The paper's formulation (theory.md section 2): L(X) = 1/2 ||softmax(c A1 X A2^T) A3 Y - E||_F^2
// and g = dL/dX, by hand, against finite differences, and against the general reference run on
// Q = A1 X, K = A2, V = A3 Y, dO = O - E (g = A1^T dQ).
#include <spattn/reference.hpp>

#include "support/reference_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <vector>

namespace {

using spattn::TensorView;
using sparse_formats::CsrPattern;
namespace reference = spattn::reference;
using spattn::testing::make_mask;
using spattn::testing::random_values;
using spattn::testing::view;

// C = A B for row-major A (rows x inner), B (inner x cols).
std::vector<double> matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t rows, int64_t inner,
                           int64_t cols) {
  std::vector<double> out(static_cast<std::size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t t = 0; t < inner; ++t)
      for (int64_t j = 0; j < cols; ++j)
        out[static_cast<std::size_t>(i * cols + j)] +=
            a[static_cast<std::size_t>(i * inner + t)] * b[static_cast<std::size_t>(t * cols + j)];
  return out;
}

// A random problem that owns its arrays.
struct RandomProblem {
  int64_t n, d;
  std::vector<double> a1, a2, a3, e, x, y;
  std::optional<CsrPattern<int32_t>> mask;
  sparse_formats::CsrPatternView<int32_t> mask_view;
  double scale;

  RandomProblem(int64_t n_, int64_t d_, uint64_t seed, bool masked, double scale_)
      : n(n_), d(d_), scale(scale_) {
    const auto nd = static_cast<std::size_t>(n * d);
    const auto dd = static_cast<std::size_t>(d * d);
    a1 = random_values(nd, seed);
    a2 = random_values(nd, seed + 1);
    a3 = random_values(nd, seed + 2);
    e = random_values(nd, seed + 3);
    x = random_values(dd, seed + 4);
    y = random_values(dd, seed + 5);
    if (masked) {  // row 2 empty, the rest a fixed irregular pattern
      mask = make_mask(n, n, [](int64_t i, int64_t j) { return i != 2 && (i + 2 * j) % 3 != 1; });
      mask_view = mask->view();
    }
  }
  RandomProblem(const RandomProblem&) = delete;  // mask_view points into mask
  RandomProblem& operator=(const RandomProblem&) = delete;

  reference::PaperProblem<int32_t> problem() const {
    return {n, d, a1.data(), a2.data(), a3.data(), e.data(), x.data(), y.data(), mask ? &mask_view : nullptr, scale};
  }
};

TEST(ReferencePaper, TwoByOneByHand) {
  // n = 2, d = 1, scale 1: A1 = (1, 1), X = ln 3, A2 = (0, 1), so A = A1 X A2^T = [[0, ln 3], [0, ln 3]]
  // and both rows of f are (1/4, 3/4). A3 = (4, 8), Y = 1: h = (4, 8), f h = (7, 7). E = (6, 9):
  // c = (1, -2), L = (1 + 4) / 2 = 2.5.
  // q = c h^T = [[4, 8], [-8, -16]]; f ∘ q = [[1, 6], [-2, -12]] with row sums (7, -14);
  // p = f ∘ q - rowsum * f = [[1 - 7/4, 6 - 21/4], [-2 + 14/4, -12 + 42/4]] = [[-0.75, 0.75], [1.5, -1.5]];
  // g = A1^T p A2 = p_01 + p_11 = 0.75 - 1.5 = -0.75.
  // Check by calculus: with s = sigmoid(X), L = ((4s - 2)^2 + (4s - 5)^2) / 2, so
  // dL/dX = (8s - 7) * 4 s (1 - s) = (6 - 7) * 4 * 3/16 = -0.75 at s = 3/4.
  const std::vector<double> a1{1.0, 1.0}, a2{0.0, 1.0}, a3{4.0, 8.0}, e{6.0, 9.0}, x{std::log(3.0)}, y{1.0};
  const reference::PaperProblem<int32_t> problem{2, 1, a1.data(), a2.data(), a3.data(), e.data(), x.data(), y.data()};
  EXPECT_NEAR(reference::paper_loss(problem), 2.5, 1e-14);
  const auto g = reference::paper_gradient(problem);
  ASSERT_EQ(g.size(), 1u);
  EXPECT_NEAR(g[0], -0.75, 1e-14);
}

TEST(ReferencePaper, EmptyMaskRowsGiveZeroOutputRows) {
  // Every row empty: O = 0, so L = ||E||^2 / 2 = (1 + 4 + 9 + 16) / 2 = 15 and g = 0.
  const std::vector<double> a{1.0, 2.0, 3.0, 4.0}, e{1.0, 2.0, 3.0, 4.0}, x{0.5}, y{2.0};
  const auto empty = CsrPattern<int64_t>::empty(4, 4);
  const auto view = empty.view();
  const reference::PaperProblem<int64_t> problem{4, 1, a.data(), a.data(), a.data(), e.data(), x.data(), y.data(), &view};
  EXPECT_EQ(reference::paper_loss(problem), 15.0);
  EXPECT_EQ(reference::paper_gradient(problem), std::vector<double>{0.0});
}

TEST(ReferencePaper, SizeZero) {
  const reference::PaperProblem<int32_t> nothing{};
  EXPECT_EQ(reference::paper_loss(nothing), 0.0);
  EXPECT_TRUE(reference::paper_gradient(nothing).empty());
  // n = 0, d = 2: no rows, so L = 0 and g = 0 (of shape d x d).
  const std::vector<double> xy{1.0, 2.0, 3.0, 4.0};
  const reference::PaperProblem<int32_t> no_rows{0, 2, nullptr, nullptr, nullptr, nullptr, xy.data(), xy.data()};
  EXPECT_EQ(reference::paper_gradient(no_rows), std::vector<double>(4, 0.0));
}

// Central differences over every entry of X; error budget as in reference_backward_test.
TEST(ReferencePaper, GradientMatchesFiniteDifferences) {
  uint64_t seed = 500;
  for (const int64_t d : {3, 4, 5}) {
    for (const int64_t n : {4, 7}) {
      for (const bool masked : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", d " << d << ", masked " << masked);
        RandomProblem random(n, d, seed, masked, masked ? 0.4 : 1.0);
        seed += 10;
        const auto g = reference::paper_gradient(random.problem());
        ASSERT_EQ(g.size(), static_cast<std::size_t>(d * d));
        const double h = 1e-5;
        double largest = 0.0;
        for (std::size_t t = 0; t < random.x.size(); ++t) {
          const double saved = random.x[t];
          random.x[t] = saved + h;
          const double up = reference::paper_loss(random.problem());
          random.x[t] = saved - h;
          const double down = reference::paper_loss(random.problem());
          random.x[t] = saved;
          const double fd = (up - down) / (2.0 * h);
          EXPECT_LE(std::abs(fd - g[t]), 1e-6 * std::max(1.0, std::abs(g[t])))
              << "g[" << t << "]: finite difference " << fd << ", paper_gradient " << g[t];
          largest = std::max(largest, std::abs(g[t]));
        }
        EXPECT_GT(largest, 1e-2);
      }
    }
  }
}

// The paper's route (f, q, p = f ∘ q - diag(rowsum(f ∘ q)) f) and the attention route
// (forward, then backward with dO = O - E, then A1^T dQ) are independent code; they must agree.
TEST(ReferencePaper, AgreesWithGeneralReference) {
  uint64_t seed = 900;
  for (const int64_t d : {3, 5}) {
    for (const int64_t n : {4, 6, 7}) {
      for (const bool masked : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << ", d " << d << ", masked " << masked);
        const double scale = masked ? 0.7 : 1.0;
        const RandomProblem random(n, d, seed, masked, scale);
        seed += 10;
        const auto full = make_mask(n, n, [](int64_t, int64_t) { return true; });
        const auto mask = masked ? random.mask_view : full.view();

        const auto q = matmul(random.a1, random.x, n, d, d);  // Q = A1 X
        const auto v = matmul(random.a3, random.y, n, d, d);  // V = A3 Y
        const auto as_view = [&](const std::vector<double>& data) {
          return TensorView<const double>::matrix(data.data(), n, d);
        };
        const auto forward = reference::forward<int32_t>(as_view(q), as_view(random.a2), as_view(v), {mask}, scale);
        std::vector<double> d_o(forward.o.size());  // dO = O - E
        double loss = 0.0;
        for (std::size_t t = 0; t < d_o.size(); ++t) {
          d_o[t] = forward.o[t] - random.e[t];
          loss += 0.5 * d_o[t] * d_o[t];
        }
        const auto grads = reference::backward<int32_t>(as_view(q), as_view(random.a2), as_view(v), as_view(d_o),
                                                        {mask}, scale);
        std::vector<double> a1_t(random.a1.size());  // A1^T (d x n)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < d; ++c)
            a1_t[static_cast<std::size_t>(c * n + i)] = random.a1[static_cast<std::size_t>(i * d + c)];
        const auto expected = matmul(a1_t, grads.dq, d, n, d);  // g = A1^T dQ

        EXPECT_NEAR(reference::paper_loss(random.problem()), loss, 1e-13 * std::max(1.0, loss));
        const auto g = reference::paper_gradient(random.problem());
        ASSERT_EQ(g.size(), expected.size());
        for (std::size_t t = 0; t < g.size(); ++t) EXPECT_NEAR(g[t], expected[t], 1e-13) << "g[" << t << "]";
      }
    }
  }
}

}  // namespace
