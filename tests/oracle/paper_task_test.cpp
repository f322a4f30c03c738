// The paper's task g = dL/dX on the two-level memory: it matches the fp64 reference, its counted
// I/O equals the prediction exactly, and it respects M.
#include <spattn/paper.hpp>
#include <spattn/reference.hpp>

#include "support/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

struct Problem {
  int64_t n, d;
  std::vector<float> a1, a2, a3, e, x, y;
  spattn::PaperInputs inputs() const {
    return {n, d, a1.data(), a2.data(), a3.data(), e.data(), x.data(), y.data(), 1.0f};
  }
};

Problem make_problem(int64_t n, int64_t d, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](int64_t count) {
    std::vector<float> values(static_cast<size_t>(count));
    for (float& value : values) value = uniform(rng);
    return values;
  };
  return {n, d, fill(n * d), fill(n * d), fill(n * d), fill(n * d), fill(d * d), fill(d * d)};
}

std::vector<double> reference_gradient(const Problem& p) {
  auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const auto a1 = wide(p.a1), a2 = wide(p.a2), a3 = wide(p.a3), e = wide(p.e), x = wide(p.x), y = wide(p.y);
  spattn::reference::PaperProblem<int32_t> problem;
  problem.n = p.n;
  problem.d = p.d;
  problem.a1 = a1.data();
  problem.a2 = a2.data();
  problem.a3 = a3.data();
  problem.e = e.data();
  problem.x = x.data();
  problem.y = y.data();
  return spattn::reference::paper_gradient(problem);
}

}  // namespace

TEST(PaperTask, MatchesTheReferenceAndItsPredictionWithBothTilings) {
  for (int64_t n : {1, 7, 33}) {
    for (int64_t d : {1, 4, 8}) {
      const Problem p = make_problem(n, d, static_cast<unsigned>(n * 100 + d));
      const auto expected = reference_gradient(p);
      // Terms: the attention's d + n, and the final A1^T dQ product's n.
      const double tolerance = spattn::testing::fp32_tolerance(
          d + 2 * n, spattn::testing::max_abs(expected)) * static_cast<double>(d);
      for (auto algorithm : {spattn::Algorithm::flash, spattn::Algorithm::small_cache}) {
        for (int64_t m : {int64_t{8} * d + 16, int64_t{64} * d, int64_t{4} * n * d + 64}) {
          SCOPED_TRACE("n " + std::to_string(n) + " d " + std::to_string(d) + " M " + std::to_string(m) +
                       " " + spattn::algorithm_name(algorithm));
          std::vector<float> g(static_cast<size_t>(d * d), -7.0f);
          spattn::io::Ledger ledger;
          const auto plan = spattn::paper_gradient(p.inputs(), g.data(), m, algorithm, &ledger);
          EXPECT_EQ(ledger.reads(), plan.reads);
          EXPECT_EQ(ledger.writes(), plan.writes);
          EXPECT_LE(ledger.peak_resident(), m);
          EXPECT_LE(spattn::testing::max_abs_error(g, expected), tolerance);
          // With one key the softmax is constant, so g = 0 exactly; otherwise it is not.
          if (n > 1) {
            EXPECT_GT(spattn::testing::max_abs(std::vector<double>(g.begin(), g.end())), 1e-3);
          }
          // The native run (no ledger) computes the same bits.
          std::vector<float> native(g.size());
          spattn::paper_gradient(p.inputs(), native.data(), m, algorithm, nullptr);
          EXPECT_EQ(native, g);
        }
      }
    }
  }
}

TEST(PaperTask, AutomaticPicksTheSmallerPrediction) {
  for (int64_t m : {int64_t{400}, int64_t{1024}, int64_t{16384}, int64_t{65536}}) {
    const auto flash = spattn::plan_paper_gradient(256, 64, m, spattn::Algorithm::flash);
    const auto small = spattn::plan_paper_gradient(256, 64, m, spattn::Algorithm::small_cache);
    const auto chosen = spattn::plan_paper_gradient(256, 64, m, spattn::Algorithm::automatic);
    EXPECT_EQ(chosen.total(), std::min(flash.total(), small.total())) << "M " << m;
  }
}

TEST(PaperTask, BadInputIsRejectedBeforeAnythingIsWritten) {
  const Problem p = make_problem(4, 2, 1);
  auto inputs = p.inputs();
  inputs.x = nullptr;
  std::vector<float> g(4, 5.0f);
  try {
    spattn::paper_gradient(inputs, g.data(), 1024, spattn::Algorithm::flash);
    FAIL();
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("x is null"), std::string::npos) << error.what();
  }
  EXPECT_EQ(g, std::vector<float>(4, 5.0f));
  EXPECT_THROW(spattn::paper_gradient(p.inputs(), g.data(), 3, spattn::Algorithm::flash), spattn::InvalidArgument);
  EXPECT_THROW(spattn::plan_paper_gradient(4, 2, 1024, spattn::Algorithm::reference), spattn::InvalidArgument);
}
