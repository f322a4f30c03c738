// Tier 1 for the small-cache schedule's I/O: the words counted while it runs equal the closed-form
// prediction exactly (reads and writes separately, forward and backward, per operand where the
// formula is simple), the peak residency is the predicted one and within M, and the prediction
// scales like the paper's bound Theta((n^2 d + n d^2) / sqrt(M)) for M <= d^2 / 4.
#include "plan/dense_small_cache_tiles.hpp"
#include "schedules/small_cache/small_cache.hpp"

#include "support/head_fixture.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::io::WordKind;
using spattn::testing::HeadFixture;

using spattn::testing::kSanitized;

int64_t reads(const Ledger& ledger, Operand operand) {
  return ledger.traffic(operand, WordKind::value).reads;
}
int64_t writes(const Ledger& ledger, Operand operand) {
  return ledger.traffic(operand, WordKind::value).writes;
}

IoCount counted_lines(const Ledger& ledger) {
  const auto lines = ledger.total_lines();
  return {lines.reads, lines.writes};
}

// Runs forward and backward counted at fast memory M, with tiles chosen for and lines counted
// in lines of `line_words` words, and checks every count against the prediction.
void check_counts(const HeadShape& shape, int64_t cache_words,
                  int64_t line_words = spattn::io::kDefaultLineWords) {
  SCOPED_TRACE(::testing::Message() << "seqlen_q " << shape.seqlen_q << " seqlen_k "
                                    << shape.seqlen_k << " d " << shape.head_dim << " d_v "
                                    << shape.head_dim_v << " M " << cache_words << " L " << line_words);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  HeadFixture head(shape);

  const SmallCacheTiles forward_tiles = small_cache_tiles(shape, cache_words, Pass::forward, line_words);
  Ledger forward_ledger(line_words);
  {
    FastMemory fast(cache_words, &forward_ledger, "small_cache forward");
    small_cache_forward(fast, head.forward(), forward_tiles);
  }
  const IoCount forward = predict_small_cache_forward(shape, forward_tiles);
  EXPECT_EQ(forward_ledger.reads(), forward.reads);
  EXPECT_EQ(forward_ledger.writes(), forward.writes);
  EXPECT_EQ(counted_lines(forward_ledger), predict_small_cache_forward_lines(shape, forward_tiles, line_words));
  EXPECT_EQ(forward_ledger.peak_resident(), small_cache_fast_words(forward_tiles));
  EXPECT_LE(forward_ledger.peak_resident(), cache_words);
  EXPECT_EQ(writes(forward_ledger, Operand::s), m * n);
  EXPECT_EQ(writes(forward_ledger, Operand::lse), m);
  EXPECT_EQ(reads(forward_ledger, Operand::lse), m);
  EXPECT_EQ(writes(forward_ledger, Operand::o), m * e);
  EXPECT_EQ(forward_ledger.traffic(Operand::p, WordKind::value).total(), 0);  // never materialized

  const SmallCacheTiles backward_tiles = small_cache_tiles(shape, cache_words, Pass::backward, line_words);
  Ledger backward_ledger(line_words);
  {
    FastMemory fast(cache_words, &backward_ledger, "small_cache backward");
    small_cache_backward(fast, head.backward(), backward_tiles);
  }
  const IoCount backward = predict_small_cache_backward(shape, backward_tiles);
  EXPECT_EQ(backward_ledger.reads(), backward.reads);
  EXPECT_EQ(backward_ledger.writes(), backward.writes);
  EXPECT_EQ(counted_lines(backward_ledger), predict_small_cache_backward_lines(shape, backward_tiles, line_words));
  if (line_words == 1) {
    EXPECT_EQ(counted_lines(forward_ledger), forward);
    EXPECT_EQ(counted_lines(backward_ledger), backward);
  }
  EXPECT_EQ(backward_ledger.peak_resident(), small_cache_fast_words(backward_tiles));
  EXPECT_LE(backward_ledger.peak_resident(), cache_words);
  EXPECT_EQ(writes(backward_ledger, Operand::delta), m);
  EXPECT_EQ(reads(backward_ledger, Operand::delta), m);
  EXPECT_EQ(reads(backward_ledger, Operand::lse), m);
  EXPECT_EQ(reads(backward_ledger, Operand::o), m * e);
  EXPECT_EQ(writes(backward_ledger, Operand::p), m * n);
  EXPECT_EQ(writes(backward_ledger, Operand::ds), m * n);
  EXPECT_EQ(backward_ledger.traffic(Operand::dp, WordKind::value).total(), 0);  // fused into dS
  EXPECT_EQ(writes(backward_ledger, Operand::dq), m * d);
  EXPECT_EQ(writes(backward_ledger, Operand::dk), n * d);
  EXPECT_EQ(writes(backward_ledger, Operand::dv), n * e);
}

TEST(SmallCacheIo, CountedEqualsPredictedFromTheMinimumCacheToBeyondNd) {
  // Each (n, d) gets M > n d (always counted), M = d^2, d^2 / 4, a few small caches and the
  // minimum, the smaller ones as far as the predicted traffic stays cheap to count (small tiles
  // move few words per call; n = 1024 counts only its largest M).
  const int64_t budget = 2'000'000;  // words moved per extra case
  int counted_cases = 0;
  for (int64_t n : {1, 7, 64, 97, 257, 1024}) {
    for (int64_t d : {1, 8, 16, 64, 128}) {
      if (kSanitized && n >= 1024 && d >= 64) continue;
      const HeadShape shape{n, n, d, d};
      const int64_t minimum = small_cache_min_cache_words(shape, Pass::forward);
      std::vector<int64_t> caches;
      for (int64_t cache_words : {minimum, int64_t{16}, 3 * d + 7, d * d / 4 + 1, d * d,
                                  n * d + 1, 3 * n * d + 17}) {
        caches.push_back(std::max(cache_words, minimum));
      }
      std::sort(caches.begin(), caches.end());
      caches.erase(std::unique(caches.begin(), caches.end()), caches.end());
      int per_case = 0;
      for (auto it = caches.rbegin(); it != caches.rend(); ++it) {  // largest M first
        const int64_t traffic =
            predict_small_cache_backward(shape, small_cache_tiles(shape, *it, Pass::backward))
                .total();
        if (per_case > 0 && (n >= 1024 || traffic > budget)) continue;
        check_counts(shape, *it);
        ++per_case;
      }
      counted_cases += per_case;
    }
  }
  EXPECT_GE(counted_cases, kSanitized ? 90 : 92);
}

TEST(SmallCacheIo, RectangularAndMixedHeadDimsCountExactly) {
  for (const HeadShape shape : {HeadShape{97, 257, 64, 16}, HeadShape{257, 7, 8, 128},
                                HeadShape{1, 64, 16, 1}, HeadShape{64, 1, 1, 8},
                                HeadShape{5, 0, 4, 3}, HeadShape{0, 6, 4, 3}}) {
    for (int64_t cache_words : {5, 21, 100, 1000, 40000}) check_counts(shape, cache_words);
  }
}

TEST(SmallCacheIo, LinesCountExactlyForEveryLineSize) {
  for (const HeadShape shape : {HeadShape{97, 257, 64, 16}, HeadShape{64, 64, 64, 64},
                                HeadShape{33, 20, 1, 7}, HeadShape{20, 1, 8, 1}}) {
    for (int64_t line_words : {1, 2, 3, 8, 32}) {
      for (int64_t cache_words : {21, 300, 4000}) check_counts(shape, cache_words, line_words);
    }
  }
}

// The tiles the line model chooses move fewer lines than those chosen for words alone: n = 512,
// d = 64, M = 1024, backward (0.73M lines against 3.02M; 11.6M words against 6.52M).
TEST(SmallCacheIo, TilesChosenForLinesAreWholeLinesAndMoveFewerLines) {
  const HeadShape shape{512, 512, 64, 64};
  const SmallCacheTiles lines = small_cache_tiles(shape, 1024, Pass::backward, 16);
  const SmallCacheTiles words = small_cache_tiles(shape, 1024, Pass::backward, 1);
  const IoCount by_lines = predict_small_cache_backward_lines(shape, lines, 16);
  const IoCount by_words = predict_small_cache_backward_lines(shape, words, 16);
  EXPECT_LT(2 * by_lines.total(), by_words.total());
  // S = Q K^T reads Q and K along d in chunks that never straddle a line (the word choice reads
  // one column at a time).
  EXPECT_TRUE(16 % lines.scores.tile_k == 0 || lines.scores.tile_k % 16 == 0) << lines.scores.tile_k;
  EXPECT_GT(lines.scores.tile_k, 1);
  EXPECT_EQ(words.scores.tile_k, 1);
  // The words rise, by far less than the lines fall.
  const double words_of_lines = static_cast<double>(predict_small_cache_backward(shape, lines).total());
  const double words_of_words = static_cast<double>(predict_small_cache_backward(shape, words).total());
  EXPECT_GE(words_of_lines, words_of_words);
  EXPECT_LT(words_of_lines, 2 * words_of_words);
}

// Hand-derived: n = 2, d = d_v = 1, M = 5. S = Q K^T keeps 2 row words (max, sum), so its tiles
// are 1 x 1 x 1; tile_k = 1 = d means each Q row is loaded once for its row block: 2 reads of Q,
// 2 x 2 of K, 4 writes of S, 2 of LSE. O = P V (k = 2, d_v = 1) keeps 1 row word (LSE): 1 x 1 tiles
// with tile_k = 1 (tile_k = 2 would need 1 + 2 + 2 + 1 = 6 words), so per row 2 words of S and 2 of
// V (8 reads), 2 LSE reads, 2 writes of O.
TEST(SmallCacheIo, TwoByTwoForwardByHand) {
  const HeadShape shape{2, 2, 1, 1};
  const SmallCacheTiles tiles = small_cache_tiles(shape, 5, Pass::forward);
  EXPECT_EQ(tiles.scores.tile_m, 1);
  EXPECT_EQ(tiles.scores.tile_n, 1);
  EXPECT_EQ(tiles.output.tile_k, 1);
  EXPECT_EQ(predict_small_cache_forward(shape, tiles), (IoCount{6 + 8 + 2, 4 + 2 + 2}));
  check_counts(shape, 5);
}

// The paper's small-cache claim, on the prediction (proven equal to the count above): backward
// I/O / ((n^2 d + n d^2) / sqrt(M)) stays within a factor 2 over 16 <= M <= d^2 / 4.
// The paper's bound Theta((n^2 d + n d^2) / sqrt(M)) for M <= d^2 / 4, in words with the tiles
// chosen for words (line_words 1), and in lines x L with the tiles chosen for 16-word lines from
// M = 4 L^2 up (the tall-cache condition of the external-memory model, M >= L^2, for the tiles'
// half of M with room for their three tiles). In lines the I/O falls a little faster than 1 / sqrt(M) near that end, as the
// partial lines at the tiles' edges weigh less in larger tiles: slope -0.5 within `slope_tolerance`.
void check_bound_band(int64_t line_words, int64_t first_cache, std::vector<int64_t> dims,
                      double slope_tolerance) {
  const int64_t n = 1024;
  for (int64_t d : dims) {
    const HeadShape shape{n, n, d, d};
    const double bound_numerator = static_cast<double>(n * n * d + n * d * d);
    // Every M up to 200 (where rounding sqrt(M) to a tile side matters most), then steps of 1%,
    // and the end of the range.
    std::vector<int64_t> caches;
    for (int64_t cache_words = first_cache; cache_words < d * d / 4;
         cache_words = std::max(cache_words + 1, cache_words * 101 / 100)) {
      caches.push_back(cache_words);
    }
    caches.push_back(d * d / 4);
    // Words, or lines x L (the words the lines carry).
    const auto io_at = [&](int64_t cache_words) {
      const SmallCacheTiles tiles = small_cache_tiles(shape, cache_words, Pass::backward, line_words);
      return line_words == 1
                 ? static_cast<double>(predict_small_cache_backward(shape, tiles).total())
                 : static_cast<double>(predict_small_cache_backward_lines(shape, tiles, line_words).total() *
                                       line_words);
    };
    double lo = 1e300, hi = 0.0;
    int64_t lo_m = 0, hi_m = 0;
    for (int64_t cache_words : caches) {
      const double ratio = io_at(cache_words) / (bound_numerator / std::sqrt(static_cast<double>(cache_words)));
      if (ratio < lo) lo = ratio, lo_m = cache_words;
      if (ratio > hi) hi = ratio, hi_m = cache_words;
    }
    // Log-log slope of the I/O between the ends of the range.
    const double slope = std::log(io_at(d * d / 4) / io_at(first_cache)) /
                         std::log(static_cast<double>(d * d / 4) / static_cast<double>(first_cache));
    std::cout << "L " << line_words << ", d " << d << ": I/O / ((n^2 d + n d^2) / sqrt(M)) in [" << lo
              << " (M " << lo_m << "), " << hi << " (M " << hi_m << ")], max/min " << hi / lo
              << ", log-log slope " << slope << "\n";
    EXPECT_LE(hi / lo, 2.0) << "d " << d;
    EXPECT_NEAR(slope, -0.5, slope_tolerance) << "d " << d;
  }
}

TEST(SmallCacheIo, BackwardScalesLikeTheBoundBelowDSquaredOverFour) { check_bound_band(1, 16, {32, 64, 128}, 0.1); }

TEST(SmallCacheIo, BackwardLinesScaleLikeTheBoundBelowDSquaredOverFour) {
  check_bound_band(16, 4 * 16 * 16, {128, 256}, 0.2);
}

}  // namespace
