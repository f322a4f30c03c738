// Tier 1 for the fp64 reference forward: values computed by hand, empty rows, sizes 0..257,
// properties that pin down the indexing (masks per head, grouped-query heads, strides).
#include <spattn/reference.hpp>

#include "support/reference_fixtures.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace {

using spattn::TensorView;
using sparse_formats::CsrPattern;
namespace reference = spattn::reference;
using spattn::testing::make_mask;
using spattn::testing::random_values;
using spattn::testing::view;

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ReferenceForward, OneKeyGivesItsValueRow) {
  // n = 1: S = 0.5 * (1*3 + 2*(-1)) = 0.5, L = 0.5 (logsumexp of one score), P = 1, O = v.
  const std::vector<double> q{1.0, 2.0}, k{3.0, -1.0}, v{5.0, 7.0};
  const auto mask = make_mask(1, 1, [](int64_t, int64_t) { return true; });
  const auto result = reference::forward<int32_t>(view(q, 1, 1, 1, 2), view(k, 1, 1, 1, 2),
                                                  view(v, 1, 1, 1, 2), {mask.view()}, 0.5);
  ASSERT_EQ(result.o.size(), 2u);
  EXPECT_DOUBLE_EQ(result.o[0], 5.0);
  EXPECT_DOUBLE_EQ(result.o[1], 7.0);
  ASSERT_EQ(result.lse.size(), 1u);
  EXPECT_DOUBLE_EQ(result.lse[0], 0.5);
}

TEST(ReferenceForward, TwoByTwoByHand) {
  // d = 1, scale 1, q = (1, 2), k = (0, ln 3), v = (4, 8).
  // Row 0: S = (0, ln 3), exp = (1, 3), sum 4: P = (1/4, 3/4), L = ln 4, O = 1 + 6 = 7.
  // Row 1: S = (0, 2 ln 3), exp = (1, 9), sum 10: P = (1/10, 9/10), L = ln 10, O = 0.4 + 7.2 = 7.6.
  const std::vector<double> q{1.0, 2.0}, k{0.0, std::log(3.0)}, v{4.0, 8.0};
  const auto mask = make_mask(2, 2, [](int64_t, int64_t) { return true; });
  const auto result = reference::forward<int32_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1),
                                                  view(v, 1, 1, 2, 1), {mask.view()}, 1.0);
  EXPECT_NEAR(result.o[0], 7.0, 1e-14);
  EXPECT_NEAR(result.o[1], 7.6, 1e-14);
  EXPECT_NEAR(result.lse[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(result.lse[1], std::log(10.0), 1e-15);
}

TEST(ReferenceForward, CausalThreeByThreeByHand) {
  // d = 1, scale 1, q = (1, 1, 1), k = (0, ln 2, 0), v = (3, 6, 9), mask j <= i.
  // Row 0: S = (0): P = (1), L = 0, O = 3.
  // Row 1: S = (0, ln 2), exp = (1, 2): P = (1/3, 2/3), L = ln 3, O = 1 + 4 = 5.
  // Row 2: S = (0, ln 2, 0), exp = (1, 2, 1): P = (1/4, 1/2, 1/4), L = ln 4, O = 0.75 + 3 + 2.25 = 6.
  const std::vector<double> q{1.0, 1.0, 1.0}, k{0.0, std::log(2.0), 0.0}, v{3.0, 6.0, 9.0};
  const auto causal = make_mask(3, 3, [](int64_t i, int64_t j) { return j <= i; });
  const auto result = reference::forward<int32_t>(view(q, 1, 1, 3, 1), view(k, 1, 1, 3, 1),
                                                  view(v, 1, 1, 3, 1), {causal.view()}, 1.0);
  EXPECT_NEAR(result.o[0], 3.0, 1e-14);
  EXPECT_NEAR(result.o[1], 5.0, 1e-14);
  EXPECT_NEAR(result.o[2], 6.0, 1e-14);
  EXPECT_NEAR(result.lse[0], 0.0, 1e-15);
  EXPECT_NEAR(result.lse[1], std::log(3.0), 1e-15);
  EXPECT_NEAR(result.lse[2], std::log(4.0), 1e-15);
}

TEST(ReferenceForward, EmptyRowGivesZeroOutputAndMinusInfinityLse) {
  // Row 0 attends nothing; row 1 attends key 1 only, so O_1 = v_1, L_1 = 1 * 2 * 3 = 6.
  const std::vector<double> q{5.0, 2.0}, k{1.0, 3.0}, v{10.0, -1.0, 20.0, -2.0};
  const auto mask = make_mask<int64_t>(2, 2, [](int64_t i, int64_t j) { return i == 1 && j == 1; });
  const auto result = reference::forward<int64_t>(view(q, 1, 1, 2, 1), view(k, 1, 1, 2, 1),
                                                  view(v, 1, 1, 2, 2), {mask.view()}, 1.0);
  EXPECT_EQ(result.o[0], 0.0);
  EXPECT_EQ(result.o[1], 0.0);
  EXPECT_EQ(result.lse[0], -kInf);
  EXPECT_DOUBLE_EQ(result.o[2], 20.0);
  EXPECT_DOUBLE_EQ(result.o[3], -2.0);
  EXPECT_DOUBLE_EQ(result.lse[1], 6.0);
}

TEST(ReferenceForward, LargeScoresDoNotOverflow) {
  // Scores 1000 and 1000: exp(1000) overflows, the row max subtraction must not.
  const std::vector<double> q{1000.0}, k{1.0, 1.0}, v{1.0, 3.0};
  const auto mask = make_mask(1, 2, [](int64_t, int64_t) { return true; });
  const auto result = reference::forward<int32_t>(view(q, 1, 1, 1, 1), view(k, 1, 1, 2, 1),
                                                  view(v, 1, 1, 2, 1), {mask.view()}, 1.0);
  EXPECT_DOUBLE_EQ(result.o[0], 2.0);
  EXPECT_DOUBLE_EQ(result.lse[0], 1000.0 + std::log(2.0));
}

TEST(ReferenceForward, SeqlenZeroGivesEmptyOutputs) {
  const std::vector<double> none;
  const auto mask00 = CsrPattern<int32_t>::empty(0, 0);
  auto result = reference::forward<int32_t>(view(none, 2, 3, 0, 4), view(none, 2, 3, 0, 4),
                                            view(none, 2, 3, 0, 5), {mask00.view()}, 0.5);
  EXPECT_TRUE(result.o.empty());
  EXPECT_TRUE(result.lse.empty());

  // No queries, some keys.
  const auto k = random_values(2 * 3 * 4, 1);
  const auto mask05 = CsrPattern<int32_t>::empty(0, 3);
  result = reference::forward<int32_t>(view(none, 1, 2, 0, 4), view(k, 1, 2, 3, 4),
                                       view(k, 1, 2, 3, 4), {mask05.view()}, 0.5);
  EXPECT_TRUE(result.o.empty());

  // Queries but no keys: every row is empty.
  const auto q = random_values(2 * 3 * 4, 2);
  const auto mask30 = CsrPattern<int32_t>::empty(3, 0);
  result = reference::forward<int32_t>(view(q, 1, 2, 3, 4), view(none, 1, 2, 0, 4),
                                       view(none, 1, 2, 0, 2), {mask30.view()}, 0.5);
  ASSERT_EQ(result.o.size(), 12u);
  ASSERT_EQ(result.lse.size(), 6u);
  for (const double value : result.o) EXPECT_EQ(value, 0.0);
  for (const double value : result.lse) EXPECT_EQ(value, -kInf);
}

// With V all ones every non-empty row of O is 1 (rows of P sum to 1); with scale 0, P is uniform,
// so O_i is the mean of the attended v_j and L_i = log(row length). Random masks with empty rows.
class ReferenceForwardSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(ReferenceForwardSizes, RowsOfPSumToOneAndScaleZeroAverages) {
  const int64_t n = GetParam();
  const int64_t seqlen_k = n + 3;
  const int64_t d = 4;
  const int64_t dv = 3;
  std::mt19937_64 engine(static_cast<uint64_t>(n));
  std::bernoulli_distribution coin(0.3);
  const auto mask = make_mask(n, seqlen_k, [&](int64_t i, int64_t) { return i % 5 != 2 && coin(engine); });
  const auto q = random_values(static_cast<std::size_t>(n * d), 3);
  const auto k = random_values(static_cast<std::size_t>(seqlen_k * d), 4);
  const auto v = random_values(static_cast<std::size_t>(seqlen_k * dv), 5);
  const std::vector<double> ones(static_cast<std::size_t>(seqlen_k * dv), 1.0);

  const auto with_ones = reference::forward<int32_t>(view(q, 1, 1, n, d), view(k, 1, 1, seqlen_k, d),
                                                     view(ones, 1, 1, seqlen_k, dv), {mask.view()}, 2.0);
  const auto averaged = reference::forward<int32_t>(view(q, 1, 1, n, d), view(k, 1, 1, seqlen_k, d),
                                                    view(v, 1, 1, seqlen_k, dv), {mask.view()}, 0.0);
  int64_t non_empty_rows = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t length = mask.view().row_length(i);
    non_empty_rows += length > 0 ? 1 : 0;
    EXPECT_EQ(with_ones.lse[static_cast<std::size_t>(i)] == -kInf, length == 0) << "row " << i;
    if (length > 0) {
      EXPECT_NEAR(averaged.lse[static_cast<std::size_t>(i)], std::log(static_cast<double>(length)), 1e-13);
    }
    for (int64_t c = 0; c < dv; ++c) {
      double mean = 0.0;
      for (int64_t t = mask.view().row_begin(i); t < mask.view().row_end(i); ++t) {
        mean += v[static_cast<std::size_t>(mask.col_idx[static_cast<std::size_t>(t)] * dv + c)];
      }
      if (length > 0) mean /= static_cast<double>(length);
      const auto at = static_cast<std::size_t>(i * dv + c);
      EXPECT_NEAR(with_ones.o[at], length > 0 ? 1.0 : 0.0, 1e-14) << "row " << i;
      EXPECT_NEAR(averaged.o[at], mean, 1e-14) << "row " << i;
    }
  }
  if (n >= 7) {
    EXPECT_GT(non_empty_rows, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, ReferenceForwardSizes, ::testing::Values(1, 7, 97, 257));

// The masks of (b, h) are picked as documented: a batch * heads list equals running each head
// alone with its own mask; a heads list is shared over the batch. Also checks q's head h reads
// kv head h / (heads / kv_heads): heads 4, kv_heads 2.
TEST(ReferenceForward, MasksAndKvHeadsArePickedPerBatchAndHead) {
  const int64_t batch = 2, heads = 4, kv_heads = 2, n = 5, m = 6, d = 3, dv = 2;
  const auto q = random_values(static_cast<std::size_t>(batch * heads * n * d), 11);
  const auto k = random_values(static_cast<std::size_t>(batch * kv_heads * m * d), 12);
  const auto v = random_values(static_cast<std::size_t>(batch * kv_heads * m * dv), 13);
  std::vector<CsrPattern<int32_t>> owned;
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    owned.push_back(make_mask(n, m, [&](int64_t i, int64_t j) { return (i + j + bh) % 3 != 0; }));
  }
  reference::MaskList<int32_t> per_pair, per_head;
  for (const auto& mask : owned) per_pair.push_back(mask.view());
  for (int64_t h = 0; h < heads; ++h) per_head.push_back(owned[static_cast<std::size_t>(h)].view());

  const auto all = reference::forward(view(q, batch, heads, n, d), view(k, batch, kv_heads, m, d),
                                      view(v, batch, kv_heads, m, dv), per_pair, 0.7);
  const auto shared_over_batch = reference::forward(view(q, batch, heads, n, d), view(k, batch, kv_heads, m, d),
                                                    view(v, batch, kv_heads, m, dv), per_head, 0.7);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t g = h / 2;
      const auto one = [&](const std::vector<double>& data, int64_t hh, int64_t heads_of, int64_t rows, int64_t cols) {
        return TensorView<const double>::matrix(data.data() + ((b * heads_of + hh) * rows) * cols, rows, cols);
      };
      for (const bool shared : {false, true}) {
        const auto& mask = owned[static_cast<std::size_t>(shared ? h : b * heads + h)];
        const auto alone = reference::forward<int32_t>(one(q, h, heads, n, d), one(k, g, kv_heads, m, d),
                                                       one(v, g, kv_heads, m, dv), {mask.view()}, 0.7);
        const auto& together = shared ? shared_over_batch : all;
        for (int64_t i = 0; i < n; ++i) {
          const auto row = static_cast<std::size_t>((b * heads + h) * n + i);
          EXPECT_DOUBLE_EQ(together.lse[row], alone.lse[static_cast<std::size_t>(i)]);
          for (int64_t c = 0; c < dv; ++c) {
            EXPECT_DOUBLE_EQ(together.o[row * dv + static_cast<std::size_t>(c)],
                             alone.o[static_cast<std::size_t>(i * dv + c)]);
          }
        }
      }
    }
  }
  // The per-pair and per-head lists differ for b = 1, so the outputs must too (the test can fail).
  EXPECT_NE(all.o, shared_over_batch.o);
}

TEST(ReferenceForward, StridedInputsMatchContiguousOnes) {
  // q, k, v stored (batch, seqlen, heads, head_dim), as many frameworks lay them out.
  const int64_t batch = 2, heads = 3, n = 7, d = 4;
  const auto bshd = random_values(static_cast<std::size_t>(batch * n * heads * d), 21);
  std::vector<double> bhsd(bshd.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < n; ++s)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t c = 0; c < d; ++c)
          bhsd[static_cast<std::size_t>(((b * heads + h) * n + s) * d + c)] =
              bshd[static_cast<std::size_t>(((b * n + s) * heads + h) * d + c)];
  const TensorView<const double> strided{bshd.data(), {batch, heads, n, d}, {n * heads * d, d, heads * d, 1}};
  const auto causal = make_mask(n, n, [](int64_t i, int64_t j) { return j <= i; });
  const auto expected = reference::forward<int32_t>(view(bhsd, batch, heads, n, d), view(bhsd, batch, heads, n, d),
                                                    view(bhsd, batch, heads, n, d), {causal.view()}, 0.5);
  const auto actual = reference::forward<int32_t>(strided, strided, strided, {causal.view()}, 0.5);
  EXPECT_EQ(actual.o, expected.o);
  EXPECT_EQ(actual.lse, expected.lse);
}

TEST(ReferenceForward, Int32AndInt64MasksAgree) {
  const int64_t n = 7, d = 3;
  const auto q = random_values(static_cast<std::size_t>(n * d), 31);
  const auto pick = [](int64_t i, int64_t j) { return (i * j) % 4 != 1; };
  const auto mask32 = make_mask<int32_t>(n, n, pick);
  const auto mask64 = make_mask<int64_t>(n, n, pick);
  const auto a = reference::forward<int32_t>(view(q, 1, 1, n, d), view(q, 1, 1, n, d), view(q, 1, 1, n, d),
                                             {mask32.view()}, 1.0);
  const auto b = reference::forward<int64_t>(view(q, 1, 1, n, d), view(q, 1, 1, n, d), view(q, 1, 1, n, d),
                                             {mask64.view()}, 1.0);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
}

}  // namespace
