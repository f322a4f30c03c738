// The fp64 reference backward: values by hand, empty rows, and central finite differences of
// f = sum(dO ∘ O) against dq, dk, dv on random small problems (the one place the oracle itself
// is checked against calculus; the reference is the specification, docs/architecture.md).
#include <spattn/reference.hpp>

#include "support/reference_fixtures.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using spattn::TensorView;
using sparse_formats::CsrPattern;
namespace reference = spattn::reference;
using spattn::testing::make_mask;
using spattn::testing::random_values;
using spattn::testing::view;

TEST(ReferenceBackward, OneKeyHasNoScoreGradient) {
  // n = 1: P = 1 whatever S is, so dS = P (dP - D) = dO.v - dO.O = 0: dq = dk = 0, dv = dO.
  const std::vector<double> q{1.0, 2.0}, k{3.0, -1.0}, v{5.0, 7.0}, d_o{0.25, -4.0};
  const auto mask = make_mask(1, 1, [](int64_t, int64_t) { return true; });
  const auto grads = reference::backward<int32_t>(view(q, 1, 1, 1, 2), view(k, 1, 1, 1, 2), view(v, 1, 1, 1, 2),
                                                  view(d_o, 1, 1, 1, 2), {mask.view()}, 0.5);
  EXPECT_EQ(grads.dq, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(grads.dk, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(grads.dv, d_o);
}

TEST(ReferenceBackward, TwoByTwoByHand) {
  // The forward case of reference_forward_test: q = (1, 2), k = (0, ln 3), v = (4, 8), scale 1,
  // P = [[1/4, 3/4], [1/10, 9/10]], O = (7, 7.6). Take dO = (1, 2).
  //   D = dO ∘ O = (7, 15.2)
  //   dP = dO v^T = [[4, 8], [8, 16]]
  //   dS = P ∘ (dP - D) = [[1/4 * -3, 3/4 * 1], [1/10 * -7.2, 9/10 * 0.8]] = [[-0.75, 0.75], [-0.72, 0.72]]
  //   dQ = dS k = (0.75 ln 3, 0.72 ln 3)
  //   dK = dS^T q = (-0.75 - 1.44, 0.75 + 1.44) = (-2.19, 2.19)
  //   dV = P^T dO = (1/4 + 2/10, 3/4 + 18/10) = (0.45, 2.55)
  const std::vector<double> q{1.0, 2.0}, k{0.0, std::log(3.0)}, v{4.0, 8.0}, d_o{1.0, 2.0};
  const auto mask = make_mask(2, 2, [](int64_t, int64_t) { return true; });
  const auto grads = reference::backward<int32_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1), view(v, 1, 1, 2, 1),
                                                  view(d_o, 1, 1, 2, 1), {mask.view()}, 1.0);
  EXPECT_NEAR(grads.dq[0], 0.75 * std::log(3.0), 1e-14);
  EXPECT_NEAR(grads.dq[1], 0.72 * std::log(3.0), 1e-14);
  EXPECT_NEAR(grads.dk[0], -2.19, 1e-14);
  EXPECT_NEAR(grads.dk[1], 2.19, 1e-14);
  EXPECT_NEAR(grads.dv[0], 0.45, 1e-14);
  EXPECT_NEAR(grads.dv[1], 2.55, 1e-14);
}

TEST(ReferenceBackward, EmptyRowContributesNothing) {
  // Row 0 is empty; row 1 attends keys 0 and 1 with scale 0, so P_1 = (1/2, 1/2).
  // Row 1: O = (v0 + v1) / 2 = 2, D = 3 * 2 = 6, dP = 3 * v = (3, 9), dS = (1/2 * -3, 1/2 * 3).
  // dQ_1 = scale * ... = 0 (scale 0); dK = 0 (scale 0); dV = P^T dO = (1.5, 1.5); dq_0 = 0.
  const std::vector<double> q{7.0, -2.0}, k{1.0, 2.0}, v{1.0, 3.0}, d_o{100.0, 3.0};
  const auto mask = make_mask(2, 2, [](int64_t i, int64_t) { return i == 1; });
  auto grads = reference::backward<int32_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1), view(v, 1, 1, 2, 1),
                                            view(d_o, 1, 1, 2, 1), {mask.view()}, 0.0);
  EXPECT_EQ(grads.dq, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(grads.dk, (std::vector<double>{0.0, 0.0}));
  EXPECT_DOUBLE_EQ(grads.dv[0], 1.5);
  EXPECT_DOUBLE_EQ(grads.dv[1], 1.5);

  // With a nonzero scale, the empty row 0 still adds nothing: the result equals the problem that
  // has row 1 alone.
  const std::vector<double> q1{q[1]}, d_o1{d_o[1]};
  const auto row1 = make_mask(1, 2, [](int64_t, int64_t) { return true; });
  grads = reference::backward<int32_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1), view(v, 1, 1, 2, 1),
                                       view(d_o, 1, 1, 2, 1), {mask.view()}, 0.7);
  const auto alone = reference::backward<int32_t>(view(q1, 1, 1, 1, 1), view(k, 1, 1, 2, 1), view(v, 1, 1, 2, 1),
                                                  view(d_o1, 1, 1, 1, 1), {row1.view()}, 0.7);
  EXPECT_EQ(grads.dq[0], 0.0);
  EXPECT_EQ(grads.dq[1], alone.dq[0]);
  EXPECT_NE(alone.dq[0], 0.0);
  EXPECT_EQ(grads.dk, alone.dk);
  EXPECT_EQ(grads.dv, alone.dv);

  // Every row empty: all gradients exactly 0, never NaN, whatever dO is.
  const auto empty = CsrPattern<int32_t>::empty(2, 2);
  grads = reference::backward<int32_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1), view(v, 1, 1, 2, 1),
                                       view(d_o, 1, 1, 2, 1), {empty.view()}, 1.0);
  for (const auto* grad : {&grads.dq, &grads.dk, &grads.dv}) {
    EXPECT_EQ(*grad, (std::vector<double>{0.0, 0.0}));
  }
}

TEST(ReferenceBackward, SeqlenZeroGivesEmptyOrZeroGradients) {
  const std::vector<double> none;
  const auto mask00 = CsrPattern<int32_t>::empty(0, 0);
  auto grads = reference::backward<int32_t>(view(none, 2, 2, 0, 3), view(none, 2, 1, 0, 3), view(none, 2, 1, 0, 4),
                                            view(none, 2, 2, 0, 4), {mask00.view()}, 1.0);
  EXPECT_TRUE(grads.dq.empty() && grads.dk.empty() && grads.dv.empty());

  // No queries: keys get zero gradients of k's and v's shapes.
  const auto kv = random_values(5 * 3, 1);
  const auto mask05 = CsrPattern<int32_t>::empty(0, 5);
  grads = reference::backward<int32_t>(view(none, 1, 1, 0, 3), view(kv, 1, 1, 5, 3), view(kv, 1, 1, 5, 3),
                                       view(none, 1, 1, 0, 3), {mask05.view()}, 1.0);
  EXPECT_TRUE(grads.dq.empty());
  EXPECT_EQ(grads.dk, std::vector<double>(15, 0.0));
  EXPECT_EQ(grads.dv, std::vector<double>(15, 0.0));
}

// ---- finite differences ------------------------------------------------------------------------

struct FdCase {
  std::string name;
  int64_t batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v;
  // "shared": one mask; "per_head": heads masks; "per_pair": batch * heads masks.
  std::string mask_kind;
  double scale;
};

// f(Q, K, V) = sum(dO ∘ O) with dO fixed, so df/dQ = dq etc. Central differences with h = 1e-5
// have truncation error ~ h^2 |f'''| ~ 1e-10 and rounding error ~ eps |f| / h ~ 1e-11 here, so
// |fd - an| <= 1e-6 * max(1, |an|) has a wide margin yet would catch any wrong term (those are
// of the size of the gradient itself, ~1e-2..1).
void check_finite_differences(const FdCase& c, uint64_t seed) {
  SCOPED_TRACE(c.name);
  std::vector<double> q = random_values(static_cast<std::size_t>(c.batch * c.heads * c.seqlen_q * c.head_dim), seed);
  std::vector<double> k = random_values(static_cast<std::size_t>(c.batch * c.kv_heads * c.seqlen_k * c.head_dim), seed + 1);
  std::vector<double> v = random_values(static_cast<std::size_t>(c.batch * c.kv_heads * c.seqlen_k * c.head_dim_v), seed + 2);
  const std::vector<double> d_o =
      random_values(static_cast<std::size_t>(c.batch * c.heads * c.seqlen_q * c.head_dim_v), seed + 3);

  // Random masks, row 1 always empty, at least one full row.
  const int64_t num_masks = c.mask_kind == "shared" ? 1 : c.mask_kind == "per_head" ? c.heads : c.batch * c.heads;
  std::mt19937_64 engine(seed + 4);
  std::bernoulli_distribution coin(0.6);
  std::vector<CsrPattern<int32_t>> owned;
  reference::MaskList<int32_t> masks;
  for (int64_t m = 0; m < num_masks; ++m) {
    owned.push_back(make_mask(c.seqlen_q, c.seqlen_k, [&](int64_t i, int64_t) { return i != 1 && (i == 0 || coin(engine)); }));
  }
  for (const auto& mask : owned) masks.push_back(mask.view());

  const auto f = [&]() {
    const auto result = reference::forward(view(q, c.batch, c.heads, c.seqlen_q, c.head_dim),
                                           view(k, c.batch, c.kv_heads, c.seqlen_k, c.head_dim),
                                           view(v, c.batch, c.kv_heads, c.seqlen_k, c.head_dim_v), masks, c.scale);
    double sum = 0.0;
    for (std::size_t t = 0; t < d_o.size(); ++t) sum += d_o[t] * result.o[t];
    return sum;
  };
  const auto grads = reference::backward(view(q, c.batch, c.heads, c.seqlen_q, c.head_dim),
                                         view(k, c.batch, c.kv_heads, c.seqlen_k, c.head_dim),
                                         view(v, c.batch, c.kv_heads, c.seqlen_k, c.head_dim_v),
                                         view(d_o, c.batch, c.heads, c.seqlen_q, c.head_dim_v), masks, c.scale);

  const double h = 1e-5;
  const std::pair<std::vector<double>*, const std::vector<double>*> pairs[] = {
      {&q, &grads.dq}, {&k, &grads.dk}, {&v, &grads.dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int which = 0; which < 3; ++which) {
    auto& input = *pairs[which].first;
    const auto& analytic = *pairs[which].second;
    ASSERT_EQ(analytic.size(), input.size()) << names[which];
    double largest = 0.0;
    for (std::size_t t = 0; t < input.size(); ++t) {
      const double saved = input[t];
      input[t] = saved + h;
      const double up = f();
      input[t] = saved - h;
      const double down = f();
      input[t] = saved;
      const double fd = (up - down) / (2.0 * h);
      EXPECT_LE(std::abs(fd - analytic[t]), 1e-6 * std::max(1.0, std::abs(analytic[t])))
          << names[which] << "[" << t << "]: finite difference " << fd << ", backward " << analytic[t];
      largest = std::max(largest, std::abs(analytic[t]));
    }
    EXPECT_GT(largest, 1e-2) << names[which] << " is trivially small; the check would prove nothing";
  }
}

TEST(ReferenceBackward, MatchesFiniteDifferences) {
  const FdCase cases[] = {
      {"one head, rectangular, d_v != d", 1, 1, 1, 5, 6, 3, 2, "shared", 0.6},
      {"square, d_v == d, scale 1", 1, 1, 1, 4, 4, 4, 4, "shared", 1.0},
      {"GQA 4/2, batch 2, per (b, h) masks", 2, 4, 2, 4, 7, 3, 5, "per_pair", 0.5},
      {"GQA 4/2, per-head masks, seqlen_q > seqlen_k", 2, 4, 2, 6, 3, 2, 3, "per_head", 0.8},
      {"multi-query 3/1", 1, 3, 1, 3, 5, 2, 2, "per_head", 1.3},
  };
  uint64_t seed = 100;
  for (const auto& c : cases) {
    check_finite_differences(c, seed);
    seed += 10;
  }
}

// Grouped-query attention is multi-head attention with k and v repeated over each group, and dk,
// dv of a kv head are the sums over its group.
TEST(ReferenceBackward, GroupedQueryEqualsRepeatedKvHeads) {
  const int64_t batch = 2, heads = 4, kv_heads = 2, n = 6, d = 3, dv = 2;
  const auto q = random_values(static_cast<std::size_t>(batch * heads * n * d), 41);
  const auto k = random_values(static_cast<std::size_t>(batch * kv_heads * n * d), 42);
  const auto v = random_values(static_cast<std::size_t>(batch * kv_heads * n * dv), 43);
  const auto d_o = random_values(static_cast<std::size_t>(batch * heads * n * dv), 44);
  const auto repeat = [&](const std::vector<double>& x, int64_t dim) {
    std::vector<double> out(static_cast<std::size_t>(batch * heads * n * dim));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(x.begin() + (b * kv_heads + h / 2) * n * dim, n * dim, out.begin() + (b * heads + h) * n * dim);
    return out;
  };
  const auto k_rep = repeat(k, d);
  const auto v_rep = repeat(v, dv);
  const auto causal = make_mask(n, n, [](int64_t i, int64_t j) { return j <= i; });

  const auto gqa = reference::backward<int32_t>(view(q, batch, heads, n, d), view(k, batch, kv_heads, n, d),
                                                view(v, batch, kv_heads, n, dv), view(d_o, batch, heads, n, dv),
                                                {causal.view()}, 0.5);
  const auto mha = reference::backward<int32_t>(view(q, batch, heads, n, d), view(k_rep, batch, heads, n, d),
                                                view(v_rep, batch, heads, n, dv), view(d_o, batch, heads, n, dv),
                                                {causal.view()}, 0.5);
  for (std::size_t t = 0; t < gqa.dq.size(); ++t) EXPECT_NEAR(gqa.dq[t], mha.dq[t], 1e-15);
  const auto check_summed = [&](const std::vector<double>& grouped, const std::vector<double>& repeated, int64_t dim) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t g = 0; g < kv_heads; ++g)
        for (int64_t t = 0; t < n * dim; ++t) {
          const double sum = repeated[static_cast<std::size_t>((b * heads + 2 * g) * n * dim + t)] +
                             repeated[static_cast<std::size_t>((b * heads + 2 * g + 1) * n * dim + t)];
          EXPECT_NEAR(grouped[static_cast<std::size_t>((b * kv_heads + g) * n * dim + t)], sum, 1e-14);
        }
  };
  check_summed(gqa.dk, mha.dk, d);
  check_summed(gqa.dv, mha.dv, dv);
}

}  // namespace
