// The mask generators: hand-drawn small masks, every structured pattern against a dense predicate
// written straight from its definition (square, rectangular, sizes 0..257), random patterns'
// statistics and determinism, union / intersection laws, and every argument error.
#include <sparse_formats/convert.hpp>
#include <sparse_formats/error.hpp>
#include <sparse_formats/patterns.hpp>
#include <sparse_formats/validate.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace sf = sparse_formats;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Rows of '1' (attends) and '.' (masked): readable in failure messages.
template <typename Index>
std::vector<std::string> picture(const sf::CsrPattern<Index>& p) {
  std::vector<std::string> rows(static_cast<size_t>(p.num_rows),
                                std::string(static_cast<size_t>(p.num_cols), '.'));
  for (int64_t i = 0; i < p.num_rows; ++i) {
    for (auto k = p.row_ptr[static_cast<size_t>(i)]; k < p.row_ptr[static_cast<size_t>(i) + 1];
         ++k) {
      rows[static_cast<size_t>(i)][static_cast<size_t>(p.col_idx[static_cast<size_t>(k)])] = '1';
    }
  }
  return rows;
}

using Predicate = std::function<bool(int64_t i, int64_t j, int64_t pos)>;

std::vector<std::string> oracle(int64_t nq, int64_t nk, const Predicate& attends) {
  std::vector<std::string> rows(static_cast<size_t>(nq), std::string(static_cast<size_t>(nk), '.'));
  for (int64_t i = 0; i < nq; ++i) {
    for (int64_t j = 0; j < nk; ++j) {
      if (attends(i, j, i + nk - nq)) rows[static_cast<size_t>(i)][static_cast<size_t>(j)] = '1';
    }
  }
  return rows;
}

// The CSR invariants of csr.hpp, checked independently of the library's validate().
template <typename Index>
::testing::AssertionResult well_formed(const sf::CsrPattern<Index>& p) {
  if (p.row_ptr.size() != static_cast<size_t>(p.num_rows) + 1 || p.row_ptr[0] != 0) {
    return ::testing::AssertionFailure() << "row_ptr size/start";
  }
  for (int64_t i = 0; i < p.num_rows; ++i) {
    const auto begin = p.row_ptr[static_cast<size_t>(i)],
               end = p.row_ptr[static_cast<size_t>(i) + 1];
    if (end < begin) return ::testing::AssertionFailure() << "row_ptr decreases at " << i;
    for (auto k = begin; k < end; ++k) {
      const auto c = p.col_idx[static_cast<size_t>(k)];
      if (c < 0 || c >= p.num_cols)
        return ::testing::AssertionFailure() << "col out of range, row " << i;
      if (k > begin && c <= p.col_idx[static_cast<size_t>(k) - 1]) {
        return ::testing::AssertionFailure() << "cols not increasing, row " << i;
      }
    }
  }
  if (static_cast<size_t>(p.row_ptr.back()) != p.col_idx.size())
    return ::testing::AssertionFailure() << "nnz";
  return ::testing::AssertionSuccess();
}

template <typename Fn>
void expect_error(Fn&& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no FormatError, expected: " << expected;
  } catch (const sf::FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << expected;
  }
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

const std::vector<std::pair<int64_t, int64_t>> kShapes = {
    {0, 0},  {1, 1},  {7, 7},  {97, 97}, {257, 257}, {0, 5},   {5, 0},
    {7, 13}, {13, 7}, {1, 97}, {97, 1},  {96, 257},  {257, 96}};

// Compares a generator with its predicate over every shape, and asserts some shape is non-empty.
void check_against_oracle(const std::string& label,
                          const std::function<sf::CsrPattern<int32_t>(int64_t, int64_t)>& make,
                          const Predicate& attends) {
  int64_t non_empty = 0;
  for (const auto& [nq, nk] : kShapes) {
    SCOPED_TRACE(label + " " + std::to_string(nq) + " x " + std::to_string(nk));
    const auto p = make(nq, nk);
    ASSERT_TRUE(well_formed(p));
    ASSERT_NO_THROW(sf::validate(p, label));  // the library's own structural check agrees
    ASSERT_EQ(p.num_rows, nq);
    ASSERT_EQ(p.num_cols, nk);
    ASSERT_EQ(picture(p), oracle(nq, nk, attends));
    non_empty += p.nnz() > 0 ? 1 : 0;
  }
  EXPECT_GT(non_empty, 0) << label << " is always empty";
}

}  // namespace

// ---- hand-checked masks -----------------------------------------------------------------------

TEST(Patterns, HandCheckedFiveByFive) {
  using V = std::vector<std::string>;
  EXPECT_EQ(picture(sf::causal_pattern(5, 5)), (V{"1....", "11...", "111..", "1111.", "11111"}));
  EXPECT_EQ(picture(sf::sliding_window_pattern(5, 5, 1)),
            (V{"11...", "111..", ".111.", "..111", "...11"}));
  EXPECT_EQ(picture(sf::sliding_window_pattern(5, 5, 1, true)),
            (V{"1....", "11...", ".11..", "..11.", "...11"}));
  EXPECT_EQ(picture(sf::dilated_window_pattern(5, 5, 1, 2)),
            (V{"1.1..", ".1.1.", "1.1.1", ".1.1.", "..1.1"}));
  EXPECT_EQ(picture(sf::dilated_window_pattern(5, 5, 2, 2, true)),
            (V{"1....", ".1...", "1.1..", ".1.1.", "1.1.1"}));
  EXPECT_EQ(picture(sf::strided_pattern(5, 5, 2)),
            (V{"1....", "11...", "111..", ".111.", "1.111"}));
  EXPECT_EQ(picture(sf::fixed_pattern(5, 5, 2, 1)),
            (V{"1....", "11...", ".11..", ".111.", ".1.11"}));
  EXPECT_EQ(picture(sf::global_window_pattern(5, 5, 1, 1)),
            (V{"11111", "111..", "1111.", "1.111", "1..11"}));
  EXPECT_EQ(picture(sf::prefix_lm_pattern(5, 5, 2)),
            (V{"11...", "11...", "111..", "1111.", "11111"}));
  EXPECT_EQ(picture(sf::documents_pattern(5, 5, {2, 3})),
            (V{"11...", "11...", "..111", "..111", "..111"}));
  EXPECT_EQ(picture(sf::documents_pattern(5, 5, {2, 3}, {}, true)),
            (V{"1....", "11...", "..1..", "..11.", "..111"}));
}

TEST(Patterns, HandCheckedRectangularIsBottomRightAligned) {
  using V = std::vector<std::string>;
  EXPECT_EQ(picture(sf::causal_pattern(3, 5)), (V{"111..", "1111.", "11111"}));
  EXPECT_EQ(picture(sf::causal_pattern(5, 3)), (V{"...", "...", "1..", "11.", "111"}));
  EXPECT_EQ(picture(sf::sliding_window_pattern(2, 5, 1, true)), (V{"..11.", "...11"}));
  // Document 0: 1 query, 2 keys; document 1: 2 queries, 3 keys; causal inside each.
  EXPECT_EQ(picture(sf::documents_pattern(3, 5, {1, 2}, {2, 3}, true)),
            (V{"11...", "..11.", "..111"}));
}

TEST(Patterns, HandCheckedBigBirdBlocks) {
  // 4 blocks of 2, w = 0, g = 1, r = 0: block row 0 is global; the others see block 0 and their
  // own.
  const sf::BigBirdParams params{2, 0, 1, 0, 0};
  EXPECT_EQ(picture(sf::bigbird_pattern(8, 8, params)),
            (std::vector<std::string>{"11111111", "11111111", "1111....", "1111....", "11..11..",
                                      "11..11..", "11....11", "11....11"}));
}

// ---- every structured pattern against its definition ----------------------------------------

TEST(Patterns, FullAndCausalMatchDefinition) {
  check_against_oracle(
      "full", [](int64_t q, int64_t k) { return sf::full_pattern(q, k); },
      [](int64_t, int64_t, int64_t) { return true; });
  check_against_oracle(
      "causal", [](int64_t q, int64_t k) { return sf::causal_pattern(q, k); },
      [](int64_t, int64_t j, int64_t pos) { return j <= pos; });
}

TEST(Patterns, WindowsMatchDefinition) {
  for (const int64_t w : {int64_t{0}, int64_t{1}, int64_t{3}, kMax}) {
    for (const bool causal : {false, true}) {
      const std::string tag = " w=" + std::to_string(w) + " causal=" + std::to_string(causal);
      check_against_oracle(
          "sliding_window" + tag,
          [&](int64_t q, int64_t k) { return sf::sliding_window_pattern(q, k, w, causal); },
          [&](int64_t, int64_t j, int64_t pos) {
            return causal ? (j <= pos && pos - j <= w) : std::llabs(pos - j) <= w;
          });
      for (const int64_t dilation : {int64_t{1}, int64_t{2}, int64_t{3}}) {
        const int64_t reach = w > kMax / dilation ? kMax : w * dilation;
        check_against_oracle(
            "dilated_window" + tag + " dilation=" + std::to_string(dilation),
            [&](int64_t q, int64_t k) {
              return sf::dilated_window_pattern(q, k, w, dilation, causal);
            },
            [&](int64_t, int64_t j, int64_t pos) {
              const int64_t d = pos - j;
              return d % dilation == 0 &&
                     (causal ? (d >= 0 && d <= reach) : std::llabs(d) <= reach);
            });
      }
      for (const int64_t g : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}}) {
        check_against_oracle(
            "global_window" + tag + " g=" + std::to_string(g),
            [&](int64_t q, int64_t k) { return sf::global_window_pattern(q, k, w, g, causal); },
            [&](int64_t, int64_t j, int64_t pos) {
              if (causal) return j <= pos && (j < g || pos - j <= w);
              return j < g || (pos >= 0 && pos < g) || std::llabs(pos - j) <= w;
            });
      }
    }
  }
}

TEST(Patterns, SparseTransformerMatchesDefinition) {
  for (const int64_t stride : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{300}}) {
    for (const bool causal : {true, false}) {
      const std::string tag =
          " stride=" + std::to_string(stride) + " causal=" + std::to_string(causal);
      check_against_oracle(
          "strided" + tag,
          [&](int64_t q, int64_t k) { return sf::strided_pattern(q, k, stride, causal); },
          [&](int64_t, int64_t j, int64_t pos) {
            const int64_t d = pos - j;
            if (causal && d < 0) return false;
            return std::llabs(d) < stride || d % stride == 0;
          });
      for (const int64_t c : {int64_t{0}, int64_t{1}, stride}) {
        check_against_oracle(
            "fixed" + tag + " c=" + std::to_string(c),
            [&](int64_t q, int64_t k) { return sf::fixed_pattern(q, k, stride, c, causal); },
            [&](int64_t, int64_t j, int64_t pos) {
              if (causal && j > pos) return false;
              return floor_div(j, stride) == floor_div(pos, stride) || j % stride >= stride - c;
            });
      }
    }
  }
}

TEST(Patterns, PrefixLmMatchesDefinition) {
  for (const int64_t p : {int64_t{0}, int64_t{3}, int64_t{1000}, kMax}) {
    check_against_oracle(
        "prefix_lm p=" + std::to_string(p),
        [&](int64_t q, int64_t k) { return sf::prefix_lm_pattern(q, k, p); },
        [&](int64_t, int64_t j, int64_t pos) { return j < p || j <= pos; });
  }
}

TEST(Patterns, DocumentsMatchDefinition) {
  for (const int64_t num_docs : {int64_t{1}, int64_t{3}, int64_t{5}}) {
    for (const bool causal : {false, true}) {
      for (const auto& [nq, nk] : kShapes) {
        if (nq < num_docs || nk < num_docs) continue;
        const auto lq = sf::even_lengths(nq, num_docs);
        const auto lk = sf::even_lengths(nk, num_docs);
        const auto p =
            sf::documents_pattern(nq, nk, lq, nq == nk ? std::vector<int64_t>{} : lk, causal);
        SCOPED_TRACE(std::to_string(nq) + " x " + std::to_string(nk) + " docs " +
                     std::to_string(num_docs));
        ASSERT_TRUE(well_formed(p));
        ASSERT_EQ(picture(p), oracle(nq, nk, [&](int64_t i, int64_t j, int64_t) {
                    int64_t q0 = 0, k0 = 0;
                    for (size_t d = 0; d < lq.size(); ++d) {
                      if (i < q0 + lq[d]) {
                        const bool same = j >= k0 && j < k0 + lk[d];
                        return same && (!causal || j - k0 <= (i - q0) + (lk[d] - lq[d]));
                      }
                      q0 += lq[d];
                      k0 += lk[d];
                    }
                    return false;
                  }));
      }
    }
  }
  // Empty documents are allowed and own no rows.
  EXPECT_EQ(picture(sf::documents_pattern(3, 3, {0, 2, 0, 1})),
            (std::vector<std::string>{"11.", "11.", "..1"}));
}

TEST(Patterns, EvenLengthsDifferByAtMostOneAndSum) {
  EXPECT_EQ(sf::even_lengths(10, 4), (std::vector<int64_t>{2, 3, 2, 3}));
  EXPECT_EQ(sf::even_lengths(7, 7), (std::vector<int64_t>(7, 1)));
  EXPECT_EQ(sf::even_lengths(0, 1), (std::vector<int64_t>{0}));
  for (const int64_t total : {int64_t{1}, int64_t{97}, int64_t{257}, int64_t{1} << 62}) {
    for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{97}}) {
      if (n > total) continue;
      const auto lengths = sf::even_lengths(total, n);
      int64_t sum = 0;
      for (const int64_t l : lengths) {
        EXPECT_TRUE(l == total / n || l == total / n + 1);
        sum += l;
      }
      EXPECT_EQ(sum, total);
    }
  }
}

// ---- properties --------------------------------------------------------------------------------

TEST(Patterns, WindowRowLengths) {
  const int64_t n = 257, w = 5;
  const auto sym = sf::sliding_window_pattern(n, n, w);
  const auto causal = sf::sliding_window_pattern(n, n, w, true);
  for (int64_t i = 0; i < n; ++i) {
    const auto len = sym.row_ptr[static_cast<size_t>(i) + 1] - sym.row_ptr[static_cast<size_t>(i)];
    EXPECT_LE(len, 2 * w + 1);
    if (i >= w && i + w < n) {
      EXPECT_EQ(len, 2 * w + 1) << "interior row " << i;
    }
    const auto clen =
        causal.row_ptr[static_cast<size_t>(i) + 1] - causal.row_ptr[static_cast<size_t>(i)];
    EXPECT_EQ(clen, std::min(i, w) + 1);
  }
  const auto dilated = sf::dilated_window_pattern(n, n, w, 4);
  EXPECT_EQ(dilated.row_ptr[101] - dilated.row_ptr[100], 2 * w + 1);  // interior row 100
}

TEST(Patterns, CausalSquareHasNothingAboveTheDiagonal) {
  for (const auto& p :
       {sf::causal_pattern(97, 97), sf::strided_pattern(97, 97, 7), sf::fixed_pattern(97, 97, 8, 2),
        sf::random_pattern(97, 97, 0.3, 5, true), sf::global_window_pattern(97, 97, 4, 3, true)}) {
    for (int64_t i = 0; i < 97; ++i) {
      for (auto k = p.row_ptr[static_cast<size_t>(i)]; k < p.row_ptr[static_cast<size_t>(i) + 1];
           ++k) {
        ASSERT_LE(p.col_idx[static_cast<size_t>(k)], i);
      }
    }
    EXPECT_GT(p.nnz(), 97);
  }
}

TEST(Patterns, Int64VariantsAgree) {
  const auto a = sf::bigbird_pattern(97, 130, {8, 1, 1, 2, 3});
  const auto b = sf::bigbird_pattern<int64_t>(97, 130, {8, 1, 1, 2, 3});
  ASSERT_EQ(a.nnz(), b.nnz());
  EXPECT_EQ(std::vector<int64_t>(a.col_idx.begin(), a.col_idx.end()), b.col_idx);
  EXPECT_EQ(std::vector<int64_t>(a.row_ptr.begin(), a.row_ptr.end()), b.row_ptr);
  EXPECT_EQ(sf::random_pattern<int64_t>(50, 60, 0.2, 9).col_idx.size(),
            sf::random_pattern(50, 60, 0.2, 9).col_idx.size());
}

TEST(Patterns, BlockPatternsConvertToFullBsrBlocks) {
  // random_blocks on the BSR grid: every stored block is full, and as many as the CSR's blocks.
  const auto rb = sf::random_blocks_pattern(100, 70, 16, 8, 0.3, 4);
  const auto mask = sf::csr_to_bsr_mask(rb.view(), 16, 8);
  EXPECT_GT(mask.blocks.num_blocks(), 0);
  for (const auto kind : mask.kind) EXPECT_EQ(kind, sf::BlockKind::full);
  // BigBird (square): its blocks are the BSR blocks of size `block`.
  const auto bb = sf::bigbird_pattern(100, 100, {16, 1, 1, 1, 2});
  const auto bb_mask = sf::csr_to_bsr_mask(bb.view(), 16, 16);
  for (const auto kind : bb_mask.kind) EXPECT_EQ(kind, sf::BlockKind::full);
  EXPECT_EQ(sf::bsr_mask_to_csr(bb_mask).col_idx, bb.col_idx);
}

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
