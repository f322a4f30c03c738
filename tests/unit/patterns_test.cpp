// The mask generators: hand-drawn small masks and every structured pattern against a dense
// predicate written straight from its definition (square, rectangular, sizes 0..257), and their
// properties. Random patterns, BigBird, union / intersection and argument errors:
// patterns_random_test.cpp.
#include "support/pattern_checks.hpp"

namespace {

using namespace spattn::testing::pattern_checks;

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

}  // namespace
