// Tier 1 for the small-cache schedule's I/O: the words counted while it runs equal the closed-form
// prediction exactly (reads and writes separately, forward and backward, per operand where the
// formula is simple), the peak residency is the predicted one and within M, and the prediction
// scales like the paper's bound Theta((n^2 d + n d^2) / sqrt(M)) for M <= d^2 / 4.
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

// Runs forward and backward counted at fast memory M and checks every count against the
// prediction.
void check_counts(const HeadShape& shape, int64_t cache_words) {
  SCOPED_TRACE(::testing::Message() << "seqlen_q " << shape.seqlen_q << " seqlen_k "
                                    << shape.seqlen_k << " d " << shape.head_dim << " d_v "
                                    << shape.head_dim_v << " M " << cache_words);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  HeadFixture head(shape);

  const SmallCacheTiles forward_tiles = small_cache_tiles(shape, cache_words, Pass::forward);
  Ledger forward_ledger;
  {
    FastMemory fast(cache_words, &forward_ledger, "small_cache forward");
    small_cache_forward(fast, head.forward(), forward_tiles);
  }
  const IoCount forward = predict_small_cache_forward(shape, forward_tiles);
  EXPECT_EQ(forward_ledger.reads(), forward.reads);
  EXPECT_EQ(forward_ledger.writes(), forward.writes);
  EXPECT_EQ(forward_ledger.peak_resident(), small_cache_fast_words(forward_tiles));
  EXPECT_LE(forward_ledger.peak_resident(), cache_words);
  EXPECT_EQ(writes(forward_ledger, Operand::s), m * n);
  EXPECT_EQ(writes(forward_ledger, Operand::lse), m);
  EXPECT_EQ(reads(forward_ledger, Operand::lse), m);
  EXPECT_EQ(writes(forward_ledger, Operand::o), m * e);
  EXPECT_EQ(forward_ledger.traffic(Operand::p, WordKind::value).total(), 0);  // never materialized

  const SmallCacheTiles backward_tiles = small_cache_tiles(shape, cache_words, Pass::backward);
  Ledger backward_ledger;
  {
    FastMemory fast(cache_words, &backward_ledger, "small_cache backward");
    small_cache_backward(fast, head.backward(), backward_tiles);
  }
  const IoCount backward = predict_small_cache_backward(shape, backward_tiles);
  EXPECT_EQ(backward_ledger.reads(), backward.reads);
  EXPECT_EQ(backward_ledger.writes(), backward.writes);
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
TEST(SmallCacheIo, BackwardScalesLikeTheBoundBelowDSquaredOverFour) {
  const int64_t n = 1024;
  for (int64_t d : {32, 64, 128}) {
    const HeadShape shape{n, n, d, d};
    const double bound_numerator = static_cast<double>(n * n * d + n * d * d);
    // Every M up to 200 (where rounding sqrt(M) to a tile side matters most), then steps of 1%,
    // and the end of the range.
    std::vector<int64_t> caches;
    for (int64_t cache_words = 16; cache_words < d * d / 4;
         cache_words = std::max(cache_words + 1, cache_words * 101 / 100)) {
      caches.push_back(cache_words);
    }
    caches.push_back(d * d / 4);
    double lo = 1e300, hi = 0.0;
    int64_t lo_m = 0, hi_m = 0;
    for (int64_t cache_words : caches) {
      const SmallCacheTiles tiles = small_cache_tiles(shape, cache_words, Pass::backward);
      const double io = static_cast<double>(predict_small_cache_backward(shape, tiles).total());
      const double ratio = io / (bound_numerator / std::sqrt(static_cast<double>(cache_words)));
      if (ratio < lo) lo = ratio, lo_m = cache_words;
      if (ratio > hi) hi = ratio, hi_m = cache_words;
    }
    // Log-log slope of the I/O between the ends of the range.
    const auto io_at = [&](int64_t cache_words) {
      return static_cast<double>(
          predict_small_cache_backward(shape, small_cache_tiles(shape, cache_words, Pass::backward))
              .total());
    };
    const double slope = std::log(io_at(d * d / 4) / io_at(16)) /
                         std::log(static_cast<double>(d * d / 4) / 16.0);
    std::cout << "d " << d << ": I/O / ((n^2 d + n d^2) / sqrt(M)) in [" << lo << " (M " << lo_m
              << "), " << hi << " (M " << hi_m << ")], max/min " << hi / lo
              << ", log-log slope " << slope << "\n";
    EXPECT_LE(hi / lo, 2.0) << "d " << d;
    EXPECT_NEAR(slope, -0.5, 0.1) << "d " << d;
  }
}

}  // namespace
