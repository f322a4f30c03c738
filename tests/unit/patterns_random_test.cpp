// The mask generators, continued (patterns_test.cpp has the structured ones): random patterns'
// statistics and determinism, BigBird, union / intersection laws, and every argument error.
#include "support/pattern_checks.hpp"

namespace {

using namespace spattn::testing::pattern_checks;

// ---- random patterns ---------------------------------------------------------------------------

TEST(Patterns, RandomDensityWithinFourSigma) {
  const int64_t nq = 257, nk = 193;
  const double cells = static_cast<double>(nq * nk);
  for (const double p : {0.01, 0.05, 0.5, 0.9}) {
    for (const uint64_t seed : {0u, 1u, 2u}) {
      const auto mask = sf::random_pattern(nq, nk, p, seed);
      ASSERT_TRUE(well_formed(mask));
      const double sigma = std::sqrt(cells * p * (1 - p));
      EXPECT_NEAR(static_cast<double>(mask.nnz()), cells * p, 4 * sigma)
          << "p " << p << " seed " << seed;
    }
  }
}

TEST(Patterns, RandomColumnsAreUniform) {
  // Every column is chosen Binomial(rows, p) times; 5 sigma catches a biased first/last column.
  const int64_t n = 257;
  const double p = 0.3;
  const auto mask = sf::random_pattern(2 * n, n, p, 11);
  std::vector<int64_t> per_col(static_cast<size_t>(n), 0);
  for (const auto c : mask.col_idx) ++per_col[static_cast<size_t>(c)];
  const double mean = 2.0 * n * p, sigma = std::sqrt(2.0 * n * p * (1 - p));
  for (int64_t j = 0; j < n; ++j)
    EXPECT_NEAR(static_cast<double>(per_col[static_cast<size_t>(j)]), mean, 5 * sigma) << j;
}

TEST(Patterns, RandomIsDeterministicPerSeedAndDiffersAcrossSeeds) {
  EXPECT_EQ(sf::random_pattern(97, 97, 0.1, 7).col_idx, sf::random_pattern(97, 97, 0.1, 7).col_idx);
  EXPECT_NE(sf::random_pattern(97, 97, 0.1, 7).col_idx, sf::random_pattern(97, 97, 0.1, 8).col_idx);
  EXPECT_EQ(sf::random_blocks_pattern(97, 97, 8, 8, 0.3, 7).col_idx,
            sf::random_blocks_pattern(97, 97, 8, 8, 0.3, 7).col_idx);
  EXPECT_NE(sf::random_blocks_pattern(97, 97, 8, 8, 0.3, 7).col_idx,
            sf::random_blocks_pattern(97, 97, 8, 8, 0.3, 8).col_idx);
  // Pinned output: the generator is exact integer arithmetic plus log(), so these columns are the
  // same on every platform; a change here changes every published random mask.
  const auto pinned = sf::random_pattern(4, 8, 0.3, 1);
  EXPECT_EQ(pinned.row_ptr, (std::vector<int32_t>{0, 0, 1, 4, 9}));
  EXPECT_EQ(pinned.col_idx, (std::vector<int32_t>{1, 3, 4, 7, 0, 2, 5, 6, 7}));
}

TEST(Patterns, RandomExtremesAndCausal) {
  EXPECT_EQ(sf::random_pattern(7, 13, 0.0, 1).nnz(), 0);
  EXPECT_EQ(picture(sf::random_pattern(7, 13, 1.0, 1)), picture(sf::full_pattern(7, 13)));
  EXPECT_EQ(picture(sf::random_pattern(13, 7, 1.0, 1, true)), picture(sf::causal_pattern(13, 7)));
  const auto causal = sf::random_pattern(97, 131, 0.2, 3, true);
  EXPECT_EQ(picture(sf::pattern_intersection(causal.view(), sf::causal_pattern(97, 131).view())),
            picture(causal));
  EXPECT_GT(causal.nnz(), 0);
  EXPECT_EQ(sf::random_blocks_pattern(7, 13, 2, 3, 0.0, 1).nnz(), 0);
  EXPECT_EQ(picture(sf::random_blocks_pattern(7, 13, 2, 3, 1.0, 1)),
            picture(sf::full_pattern(7, 13)));
}

TEST(Patterns, RandomBlocksAreWholeBlocksAtTheRightDensity) {
  const int64_t nq = 257, nk = 250, bm = 16, bn = 10;  // edge blocks clipped on both axes
  const auto mask = sf::random_blocks_pattern(nq, nk, bm, bn, 0.25, 5);
  ASSERT_TRUE(well_formed(mask));
  const auto rows = picture(mask);
  int64_t kept = 0;
  for (int64_t bi = 0; bi * bm < nq; ++bi) {
    for (int64_t bj = 0; bj * bn < nk; ++bj) {
      const char first = rows[static_cast<size_t>(bi * bm)][static_cast<size_t>(bj * bn)];
      kept += first == '1';
      for (int64_t i = bi * bm; i < std::min(nq, (bi + 1) * bm); ++i) {
        for (int64_t j = bj * bn; j < std::min(nk, (bj + 1) * bn); ++j) {
          ASSERT_EQ(rows[static_cast<size_t>(i)][static_cast<size_t>(j)], first) << i << "," << j;
        }
      }
    }
  }
  const double blocks = 17.0 * 25.0;
  EXPECT_NEAR(static_cast<double>(kept), 0.25 * blocks, 4 * std::sqrt(blocks * 0.25 * 0.75));
}

// ---- BigBird
// -------------------------------------------------------------------------------------

TEST(Patterns, BigBirdHoldsWindowGlobalAndExactlyRRandomBlocks) {
  for (const auto& [nq, nk] : kShapes) {
    for (const auto& params : {sf::BigBirdParams{4, 1, 1, 2, 7}, sf::BigBirdParams{16, 0, 2, 3, 1},
                               sf::BigBirdParams{3, 2, 0, 100, 2}}) {
      SCOPED_TRACE(std::to_string(nq) + " x " + std::to_string(nk) + " block " +
                   std::to_string(params.block));
      const auto mask = sf::bigbird_pattern(nq, nk, params);
      ASSERT_TRUE(well_formed(mask));
      const auto rows = picture(mask);
      const int64_t b = params.block, num_block_cols = (nk + b - 1) / b;
      for (int64_t i = 0; i < nq; ++i) {
        const int64_t qb = floor_div(i + nk - nq, b);
        const bool global_row = qb >= 0 && qb < params.g;
        int64_t extra = 0, candidates = 0;
        for (int64_t kb = 0; kb < num_block_cols; ++kb) {
          const bool structural = global_row || kb < params.g || std::llabs(qb - kb) <= params.w;
          const char first = rows[static_cast<size_t>(i)][static_cast<size_t>(kb * b)];
          for (int64_t j = kb * b; j < std::min(nk, (kb + 1) * b); ++j) {
            ASSERT_EQ(rows[static_cast<size_t>(i)][static_cast<size_t>(j)], first)
                << "partial block";
          }
          if (structural) {
            ASSERT_EQ(first, '1') << "window/global block " << kb << " missing, row " << i;
          }
          candidates += structural ? 0 : 1;
          extra += (!structural && first == '1') ? 1 : 0;
        }
        ASSERT_EQ(extra, std::min(params.r, candidates)) << "row " << i;
        if (i > 0 && floor_div(i - 1 + nk - nq, b) == qb) {
          ASSERT_EQ(rows[static_cast<size_t>(i)], rows[static_cast<size_t>(i) - 1])
              << "rows of a block differ";
        }
      }
    }
  }
}

TEST(Patterns, BigBirdIsDeterministicPerSeedAndDiffersAcrossSeeds) {
  const sf::BigBirdParams a{8, 1, 1, 3, 1}, b{8, 1, 1, 3, 2};
  EXPECT_EQ(sf::bigbird_pattern(257, 257, a).col_idx, sf::bigbird_pattern(257, 257, a).col_idx);
  EXPECT_NE(sf::bigbird_pattern(257, 257, a).col_idx, sf::bigbird_pattern(257, 257, b).col_idx);
  EXPECT_LT(sf::bigbird_pattern(257, 257, a).nnz(), 257 * 257 / 2);
}

// ---- union and intersection
// ----------------------------------------------------------------------

TEST(Patterns, UnionAndIntersectionLaws) {
  for (const auto& [nq, nk] : kShapes) {
    const auto a = sf::random_pattern(nq, nk, 0.3, 1), b = sf::sliding_window_pattern(nq, nk, 2),
               c = sf::random_blocks_pattern(nq, nk, 4, 4, 0.4, 2);
    const auto u = [](const auto& x, const auto& y) {
      return sf::pattern_union(x.view(), y.view());
    };
    const auto n = [](const auto& x, const auto& y) {
      return sf::pattern_intersection(x.view(), y.view());
    };
    SCOPED_TRACE(std::to_string(nq) + " x " + std::to_string(nk));
    ASSERT_TRUE(well_formed(u(a, b)));
    ASSERT_TRUE(well_formed(n(a, b)));
    EXPECT_EQ(picture(u(a, a)), picture(a));
    EXPECT_EQ(picture(n(a, a)), picture(a));
    EXPECT_EQ(picture(u(a, b)), picture(u(b, a)));
    EXPECT_EQ(picture(n(a, b)), picture(n(b, a)));
    EXPECT_EQ(picture(u(u(a, b), c)), picture(u(a, u(b, c))));
    EXPECT_EQ(picture(n(a, u(b, c))), picture(u(n(a, b), n(a, c))));
    EXPECT_EQ(picture(n(a, b)), picture(n(n(a, b), a)));  // A & B is a subset of A
    EXPECT_EQ(picture(u(u(a, b), a)), picture(u(a, b)));  // A is a subset of A | B
    EXPECT_EQ(u(a, b).nnz() + n(a, b).nnz(), a.nnz() + b.nnz());
    // Element by element: | is OR, & is AND.
    const auto pa = picture(a), pb = picture(b), pu = picture(u(a, b)), pn = picture(n(a, b));
    for (size_t i = 0; i < pa.size(); ++i) {
      for (size_t j = 0; j < pa[i].size(); ++j) {
        ASSERT_EQ(pu[i][j] == '1', pa[i][j] == '1' || pb[i][j] == '1');
        ASSERT_EQ(pn[i][j] == '1', pa[i][j] == '1' && pb[i][j] == '1');
      }
    }
  }
  const auto e = sf::CsrPattern<int32_t>::empty(7, 9), f = sf::full_pattern(7, 9);
  EXPECT_EQ(picture(sf::pattern_union(e.view(), f.view())), picture(f));
  EXPECT_EQ(sf::pattern_intersection(e.view(), f.view()).nnz(), 0);
}

// ---- argument errors ---------------------------------------------------------------------------

TEST(PatternErrors, ParametersNameThePatternKeyAndValue) {
  expect_error([] { sf::sliding_window_pattern(5, 5, -3); }, "sliding_window: w = -3 must be >= 0");
  expect_error([] { sf::dilated_window_pattern(5, 5, -1, 2); },
               "dilated_window: w = -1 must be >= 0");
  expect_error([] { sf::dilated_window_pattern(5, 5, 1, 0); },
               "dilated_window: dilation = 0 must be >= 1");
  expect_error([] { sf::global_window_pattern(5, 5, -1, 1); },
               "global_window: w = -1 must be >= 0");
  expect_error([] { sf::global_window_pattern(5, 5, 1, -2); },
               "global_window: g = -2 must be >= 0");
  expect_error([] { sf::strided_pattern(5, 5, 0); }, "strided: stride = 0 must be >= 1");
  expect_error([] { sf::fixed_pattern(5, 5, 0, 0); }, "fixed: stride = 0 must be >= 1");
  expect_error([] { sf::fixed_pattern(5, 5, 4, -1); }, "fixed: c = -1 must be >= 0");
  expect_error([] { sf::fixed_pattern(5, 5, 4, 5); }, "fixed: c = 5 must be <= stride = 4");
  expect_error(
      [] {
        sf::bigbird_pattern(5, 5, {0, 1, 1, 1, 0});
      },
      "bigbird: block = 0 must be >= 1");
  expect_error([] { sf::bigbird_pattern(5, 5, {2, -1, 1, 1, 0}); }, "bigbird: w = -1 must be >= 0");
  expect_error([] { sf::bigbird_pattern(5, 5, {2, 1, -1, 1, 0}); }, "bigbird: g = -1 must be >= 0");
  expect_error([] { sf::bigbird_pattern(5, 5, {2, 1, 1, -4, 0}); }, "bigbird: r = -4 must be >= 0");
  expect_error([] { sf::prefix_lm_pattern(5, 5, -1); }, "prefix_lm: p = -1 must be >= 0");
  expect_error([] { sf::random_pattern(5, 5, -0.5, 0); },
               "random: p = -0.5 must be a probability in [0, 1]");
  expect_error([] { sf::random_pattern(5, 5, 1.5, 0); }, "random: p = 1.5 must be a probability");
  expect_error([] { sf::random_pattern(5, 5, std::nan(""), 0); },
               "random: p = nan must be a probability");
  expect_error([] { sf::random_blocks_pattern(5, 5, 0, 2, 0.5, 0); },
               "random_blocks: block_m = 0 must be >= 1");
  expect_error([] { sf::random_blocks_pattern(5, 5, 2, 0, 0.5, 0); },
               "random_blocks: block_n = 0 must be >= 1");
  expect_error([] { sf::random_blocks_pattern(5, 5, 2, 2, 2.0, 0); },
               "random_blocks: p = 2 must be a probability");
}

TEST(PatternErrors, DocumentsNameTheLengths) {
  expect_error(
      [] {
        sf::documents_pattern(6, 6, {1, 2, 3, 4});
      },
      "documents: lengths sum to 10 but seqlen_q = 6 (4 documents)");
  expect_error(
      [] {
        sf::documents_pattern(6, 6, {3, -1, 4});
      },
      "documents: lengths[1] = -1 must be >= 0");
  expect_error(
      [] {
        sf::documents_pattern(6, 8, {3, 3});
      },
      "documents: seqlen_q = 6 != seqlen_k = 8: a rectangular mask needs lengths_k");
  expect_error(
      [] {
        sf::documents_pattern(6, 8, {3, 3}, {8});
      },
      "documents: lengths has 2 documents but lengths_k has 1");
  expect_error(
      [] {
        sf::documents_pattern(6, 8, {3, 3}, {4, 5});
      },
      "documents: lengths_k sum to 9 but seqlen_k = 8");
  expect_error([] { sf::even_lengths(10, 0); }, "documents: num_docs = 0 must be >= 1");
  expect_error([] { sf::even_lengths(3, 5); },
               "documents: num_docs = 5 exceeds the 3 tokens to split");
}

TEST(PatternErrors, ShapesAndIndexOverflow) {
  expect_error([] { sf::causal_pattern(-1, 5); }, "causal: seqlen_q = -1 must be >= 0");
  expect_error([] { sf::full_pattern(5, -2); }, "full: seqlen_k = -2 must be >= 0");
  expect_error([] { sf::full_pattern(1, int64_t{3} << 31); },
               "full: seqlen_k = 6442450944 does not fit the 32-bit index type");
  // 50000^2 pairs do not fit int32: refused after counting, before allocating col_idx.
  expect_error([] { sf::full_pattern(50000, 50000); },
               "full: nnz exceeds the 32-bit index type's maximum 2147483647");
  expect_error([] { sf::random_pattern(50000, 50000, 0.9, 1); }, "random: expected nnz");
  expect_error(
      [] { sf::pattern_union(sf::full_pattern(5, 7).view(), sf::full_pattern(5, 8).view()); },
      "pattern_union: shapes differ: a is 5 x 7, b is 5 x 8");
  expect_error(
      [] {
        sf::pattern_intersection(sf::full_pattern(4, 7).view(), sf::full_pattern(5, 7).view());
      },
      "pattern_intersection: shapes differ: a is 4 x 7, b is 5 x 7");
  const sf::CsrPatternView<int32_t> broken{3, 3, nullptr, nullptr};
  expect_error([&] { sf::pattern_union(broken, broken); },
               "pattern_union: a has 3 rows but no row_ptr");
}

TEST(Patterns, HugeParametersSaturateInsteadOfOverflowing) {
  EXPECT_EQ(picture(sf::sliding_window_pattern(7, 13, kMax)), picture(sf::full_pattern(7, 13)));
  EXPECT_EQ(picture(sf::dilated_window_pattern(7, 7, kMax, kMax)),
            picture(sf::sliding_window_pattern(7, 7, 0)));
  EXPECT_EQ(picture(sf::strided_pattern(7, 7, kMax)), picture(sf::causal_pattern(7, 7)));
  EXPECT_EQ(picture(sf::fixed_pattern(7, 7, kMax, 0)), picture(sf::causal_pattern(7, 7)));
  EXPECT_EQ(picture(sf::bigbird_pattern(7, 7, {kMax, kMax, kMax, kMax, 0})),
            picture(sf::full_pattern(7, 7)));
  EXPECT_EQ(picture(sf::global_window_pattern(7, 7, kMax, kMax, true)),
            picture(sf::causal_pattern(7, 7)));
}

}  // namespace
