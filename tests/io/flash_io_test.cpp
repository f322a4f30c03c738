// The flash schedule's word counts: counted == predicted exactly (reads and writes, forward and
// backward) over sequence lengths 0..1024, head_dim 1..128 and fast memories from the minimum to
// beyond the whole problem; the peak resident words are predicted exactly and never exceed M; the
// tiles fill M; an M below the minimum is refused with the minimum; and the prediction follows
// the paper's Theta((n^2 d^2 + n d^3) / M) over 4 d^2 <= M <= n d / 4. Numerics: flash_test.cpp.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "support/flash_runs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::io::WordKind;
using spattn::testing::count_flash_backward;
using spattn::testing::count_flash_forward;
using spattn::testing::HeadFixture;

IoCount counted(const Ledger& ledger) { return {ledger.reads(), ledger.writes()}; }
IoCount counted_lines(const Ledger& ledger) {
  const auto lines = ledger.total_lines();
  return {lines.reads, lines.writes};
}

std::string describe(const HeadShape& s, int64_t cache_words) {
  return "n_q " + std::to_string(s.seqlen_q) + ", n_k " + std::to_string(s.seqlen_k) + ", d " +
         std::to_string(s.head_dim) + ", d_v " + std::to_string(s.head_dim_v) + ", M " +
         std::to_string(cache_words);
}

// Enough fast memory for every loop of both passes to hold its whole sequence in one tile.
int64_t whole_problem_words(const HeadShape& s) {
  const int64_t n_q = std::max<int64_t>(s.seqlen_q, 1), n_k = std::max<int64_t>(s.seqlen_k, 1);
  const FlashTiles whole{n_q, n_k, n_q, n_k};
  return std::max(flash_resident_words(s, whole, Pass::forward),
                  flash_resident_words(s, whole, Pass::backward));
}

// `points` fast-memory sizes spaced geometrically from the minimum to twice the whole problem
// (one point: the geometric middle).
std::vector<int64_t> cache_sizes(const HeadShape& s, int points) {
  const auto lo = static_cast<double>(flash_min_cache_words(s, Pass::backward));
  const double hi = 2.0 * static_cast<double>(whole_problem_words(s));
  if (points == 1) return {static_cast<int64_t>(std::sqrt(lo * hi))};
  std::vector<int64_t> sizes;
  for (int i = 0; i < points; ++i) {
    sizes.push_back(static_cast<int64_t>(lo * std::pow(hi / lo, i / static_cast<double>(points - 1))));
  }
  sizes.front() = static_cast<int64_t>(lo);
  return sizes;
}

// Runs both passes at M and checks: counted == predicted; peak == predicted resident <= M; the
// tiles are the largest that fit (one more outer row would not) and fill more than half of M.
void check_counts(HeadFixture& head, const HeadShape& s, int64_t cache_words) {
  SCOPED_TRACE(describe(s, cache_words));
  const FlashTiles fwd = flash_tiles(s, cache_words, Pass::forward);
  const Ledger fwd_ledger = count_flash_forward(head, fwd, cache_words);
  EXPECT_EQ(counted(fwd_ledger), predict_flash_forward(s, fwd));
  EXPECT_EQ(counted_lines(fwd_ledger), predict_dense_forward_lines(s, fwd, fwd_ledger.line_words()));
  EXPECT_EQ(fwd_ledger.peak_resident(), flash_resident_words(s, fwd, Pass::forward));
  EXPECT_LE(fwd_ledger.peak_resident(), cache_words);
  if (fwd.block_q < s.seqlen_q) {
    EXPECT_GT(flash_resident_words(s, {fwd.block_q + 1, fwd.block_k, 0, 0}, Pass::forward), cache_words);
    EXPECT_GT(2 * fwd_ledger.peak_resident(), cache_words);
  }

  const FlashTiles bwd = flash_tiles(s, cache_words, Pass::backward);
  const Ledger bwd_ledger = count_flash_backward(head, bwd, cache_words);
  EXPECT_EQ(counted(bwd_ledger), predict_flash_backward(s, bwd));
  EXPECT_EQ(counted_lines(bwd_ledger), predict_dense_backward_lines(s, bwd, bwd_ledger.line_words()));
  EXPECT_EQ(bwd_ledger.peak_resident(), flash_resident_words(s, bwd, Pass::backward));
  EXPECT_LE(bwd_ledger.peak_resident(), cache_words);
  if (bwd.block_q < s.seqlen_q) {
    FlashTiles more = bwd;
    ++more.block_q;
    EXPECT_GT(flash_resident_words(s, more, Pass::backward), cache_words);
  }
  if (bwd.dkdv_block_k < s.seqlen_k) {
    FlashTiles more = bwd;
    ++more.dkdv_block_k;
    EXPECT_GT(flash_resident_words(s, more, Pass::backward), cache_words);
  }
  if (bwd.block_q < s.seqlen_q || bwd.dkdv_block_k < s.seqlen_k) {
    EXPECT_GT(2 * bwd_ledger.peak_resident(), cache_words);
  }
}

TEST(FlashIo, HandCountedPerOperand) {
  // n_q = 7, n_k = 5, d = 3, d_v = 2.
  const HeadShape s{7, 5, 3, 2};
  HeadFixture head(s);
  // Forward, query tiles of 3 rows (3 tiles), key tiles of 2: Q once (21), K and V once per
  // query tile (3 * 15, 3 * 10); O (14) and LSE (7) written once.
  const Ledger f = count_flash_forward(head, {3, 2, 0, 0}, 1000);
  EXPECT_EQ(f.traffic(Operand::q, WordKind::value).reads, 21);
  EXPECT_EQ(f.traffic(Operand::k, WordKind::value).reads, 45);
  EXPECT_EQ(f.traffic(Operand::v, WordKind::value).reads, 30);
  EXPECT_EQ(f.traffic(Operand::o, WordKind::value).writes, 14);
  EXPECT_EQ(f.traffic(Operand::lse, WordKind::value).writes, 7);
  EXPECT_EQ(counted(f), (IoCount{96, 21}));
  // Resident: 3 (3 + 2 + 2) + 2 (3 + 2) + 3 * 2 = 37.
  EXPECT_EQ(f.peak_resident(), 37);

  // Backward, dQ pass tiles (3, 2), dK/dV pass tiles (query 2, key 2): 3 key tiles, 3 query tiles.
  //   D pre-pass:  O 14, dO 14 read; D 7 written
  //   dK/dV pass:  K 15, V 10 once; Q 3*21, dO 3*14, LSE 3*7, D 3*7; dK 15, dV 10 written
  //   dQ pass:     Q 21, dO 14, LSE 7, D 7 once; K 3*15, V 3*10; dQ 21 written
  const Ledger b = count_flash_backward(head, {3, 2, 2, 2}, 1000);
  EXPECT_EQ(b.traffic(Operand::o, WordKind::value).reads, 14);
  EXPECT_EQ(b.traffic(Operand::d_o, WordKind::value).reads, 14 + 42 + 14);
  EXPECT_EQ(b.traffic(Operand::q, WordKind::value).reads, 63 + 21);
  EXPECT_EQ(b.traffic(Operand::k, WordKind::value).reads, 15 + 45);
  EXPECT_EQ(b.traffic(Operand::v, WordKind::value).reads, 10 + 30);
  EXPECT_EQ(b.traffic(Operand::lse, WordKind::value).reads, 21 + 7);
  EXPECT_EQ(b.traffic(Operand::delta, WordKind::value).reads, 21 + 7);
  EXPECT_EQ(b.traffic(Operand::delta, WordKind::value).writes, 7);
  EXPECT_EQ(b.traffic(Operand::dq, WordKind::value).writes, 21);
  EXPECT_EQ(b.traffic(Operand::dk, WordKind::value).writes, 15);
  EXPECT_EQ(b.traffic(Operand::dv, WordKind::value).writes, 10);
  EXPECT_EQ(counted(b), (IoCount{14 + 70 + 84 + 60 + 40 + 28 + 28, 7 + 21 + 15 + 10}));
  // Resident: dK/dV pass 2 (6 + 4) + 2 (3 + 2 + 2) + 4 = 38; dQ pass 3 (6 + 2 + 2) + 2 (5) + 6 = 46;
  // D pre-pass 3 (4 + 1) = 15.
  EXPECT_EQ(b.peak_resident(), 46);
  EXPECT_EQ(counted(b), predict_flash_backward(s, {3, 2, 2, 2}));
  EXPECT_EQ(counted(f), predict_flash_forward(s, {3, 2, 0, 0}));
}

TEST(FlashIo, CountedEqualsPredictedOverShapesAndCacheSizes) {
  for (const int64_t n : {1, 7, 64, 97, 257, 1024}) {
    for (const int64_t d : {1, 8, 16, 64, 128}) {
      // The arithmetic grows as n^2 d (the counts do not depend on it): fewer cache sizes for the
      // large cases, and n = 1024 x d = 128 (1.2 G multiply-adds per M) left to n = 257 and the
      // closed form.
      if (n == 1024 && d == 128) continue;
      const HeadShape s{n, n, d, d};
      const double work = static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d);
      const int points = work > 6e7 ? 1 : work > 1.5e7 ? 2 : work > 5e6 ? 3 : 5;
      HeadFixture head(s);
      for (const int64_t cache_words : cache_sizes(s, points)) check_counts(head, s, cache_words);
    }
  }
}

TEST(FlashIo, CountedEqualsPredictedOnRectangularAndEmptyShapes) {
  const HeadShape shapes[] = {{97, 257, 8, 24}, {257, 7, 16, 3}, {7, 97, 1, 64}, {64, 1, 8, 8},
                              {1, 1, 1, 1},     {0, 7, 8, 8},    {7, 0, 8, 8},   {0, 0, 4, 4},
                              {33, 20, 1, 128}};
  for (const HeadShape& s : shapes) {
    HeadFixture head(s);
    for (const int64_t cache_words : cache_sizes(s, 4)) check_counts(head, s, cache_words);
  }
}

// Lines of other sizes, and tiles that start inside lines: L = 1 counts words, L = 3 and 32 split
// rows and vectors across lines.
TEST(FlashIo, CountedLinesEqualPredictedForEveryLineSize) {
  const HeadShape shapes[] = {{97, 257, 8, 24}, {257, 7, 16, 3}, {7, 97, 1, 64}, {64, 64, 64, 64},
                              {33, 20, 1, 128}, {7, 0, 8, 8}};
  for (const HeadShape& s : shapes) {
    HeadFixture head(s);
    for (const int64_t line_words : {1, 2, 3, 8, 32}) {
      for (const int64_t cache_words : cache_sizes(s, 3)) {
        SCOPED_TRACE(describe(s, cache_words) + ", L " + std::to_string(line_words));
        const FlashTiles fwd = flash_tiles(s, cache_words, Pass::forward);
        const FlashTiles bwd = flash_tiles(s, cache_words, Pass::backward);
        const Ledger f = count_flash_forward(head, fwd, cache_words, nullptr, line_words);
        const Ledger b = count_flash_backward(head, bwd, cache_words, nullptr, line_words);
        EXPECT_EQ(counted_lines(f), predict_dense_forward_lines(s, fwd, line_words));
        EXPECT_EQ(counted_lines(b), predict_dense_backward_lines(s, bwd, line_words));
        if (line_words == 1) {
          EXPECT_EQ(counted_lines(f), counted(f));
          EXPECT_EQ(counted_lines(b), counted(b));
        }
      }
    }
  }
}

// By hand: n = 20, d = e = 16, L = 16, tiles 8 x 8. Forward: Q 20 rows of one line; K and V 20 rows
// each per query tile (3 tiles); O 20 lines; LSE runs [0, 8), [8, 16), [16, 20): 1 + 1 + 1 lines.
TEST(FlashIo, LinesByHand) {
  const HeadShape s{20, 20, 16, 16};
  HeadFixture head(s);
  const FlashTiles tiles{8, 8, 0, 0};
  const Ledger f = count_flash_forward(head, tiles, 10000, nullptr, 16);
  EXPECT_EQ(f.lines(Operand::q, WordKind::value).reads, 20);
  EXPECT_EQ(f.lines(Operand::k, WordKind::value).reads, 3 * 20);
  EXPECT_EQ(f.lines(Operand::o, WordKind::value).writes, 20);
  EXPECT_EQ(f.lines(Operand::lse, WordKind::value).writes, 3);
  // L = 6: a 16-word row spans 3 lines; the LSE runs [0, 8), [8, 16), [16, 20) span lines 0-1,
  // 1-2 and 2-3: 2 + 2 + 2.
  const Ledger g = count_flash_forward(head, tiles, 10000, nullptr, 6);
  EXPECT_EQ(g.lines(Operand::q, WordKind::value).reads, 20 * 3);
  EXPECT_EQ(g.lines(Operand::lse, WordKind::value).writes, 2 + 2 + 2);
}

TEST(FlashIo, EmptySequencesReadNothing) {
  EXPECT_EQ(predict_flash_forward({7, 0, 8, 4}, {1, 1, 0, 0}), (IoCount{0, 7 * 5}));
  EXPECT_EQ(predict_flash_backward({7, 0, 8, 4}, {1, 1, 1, 1}), (IoCount{0, 7 * 8}));
  EXPECT_EQ(predict_flash_backward({0, 5, 8, 4}, {1, 1, 1, 1}), (IoCount{0, 5 * 12}));
  EXPECT_EQ(predict_flash_forward({0, 5, 8, 4}, {1, 1, 0, 0}), (IoCount{0, 0}));
}

TEST(FlashIo, MinimumCacheIsOneByOneTiles) {
  const HeadShape s{100, 100, 64, 64};
  EXPECT_EQ(flash_min_cache_words(s, Pass::forward), 2 * 64 + 2 * 64 + 3);
  EXPECT_EQ(flash_min_cache_words(s, Pass::backward), 3 * 64 + 3 * 64 + 3);
  EXPECT_EQ(flash_min_cache_words({5, 9, 8, 24}, Pass::backward), 3 * 8 + 3 * 24 + 3);
  EXPECT_EQ(flash_tiles(s, 387, Pass::backward), (FlashTiles{1, 1, 1, 1}));
  EXPECT_EQ(flash_tiles(s, 259, Pass::forward), (FlashTiles{1, 1, 0, 0}));
  // At the minimum the schedule fills fast memory exactly.
  const HeadShape small{9, 11, 64, 64};
  HeadFixture head(small);
  EXPECT_EQ(count_flash_backward(head, flash_tiles(small, 387, Pass::backward), 387).peak_resident(), 387);
  EXPECT_EQ(count_flash_forward(head, flash_tiles(small, 259, Pass::forward), 259).peak_resident(), 259);
}

std::string tiles_error(const HeadShape& s, int64_t cache_words, Pass pass) {
  try {
    flash_tiles(s, cache_words, pass);
  } catch (const spattn::InvalidArgument& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(FlashIo, CacheBelowTheMinimumIsRefusedWithTheMinimum) {
  EXPECT_EQ(tiles_error({100, 100, 64, 64}, 100, Pass::backward),
            "flash backward: M = 100 words is below the minimum 387 for head_dim 64 and head_dim_v 64 "
            "(1 x 1 tiles of the dK/dV pass hold K, V, dK, dV | Q, dO, LSE, D | P: 3 d + 3 d_v + 3 "
            "words)");
  EXPECT_EQ(tiles_error({100, 100, 64, 64}, 258, Pass::forward),
            "flash forward: M = 258 words is below the minimum 259 for head_dim 64 and head_dim_v 64 "
            "(1 x 1 tiles hold Q, O, max, sum | K, V | S: 2 d + 2 d_v + 3 words)");
  EXPECT_EQ(tiles_error({100, 100, 64, 64}, 386, Pass::backward).substr(0, 51),
            "flash backward: M = 386 words is below the minimum ");
  EXPECT_EQ(tiles_error({100, 100, 64, 64}, 387, Pass::backward), "(no error)");
}

TEST(FlashIo, RefusesNegativeShapesAndNonPositiveTiles) {
  EXPECT_EQ(tiles_error({-1, 4, 8, 8}, 1000, Pass::forward),
            "flash_min_cache_words: negative shape (seqlen_q -1, seqlen_k 4, head_dim 8, head_dim_v 8)");
  try {
    predict_flash_backward({4, 4, 8, 8}, {4, 4, 4, 0});
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_STREQ(error.what(), "predict_flash_backward: tile dkdv_block_k = 0 rows must be positive");
  }
}

TEST(FlashIo, TilesAtLargeCacheAreTheWholeSequences) {
  // M >= n d and beyond: every outer tile is capped at its sequence, the inner ones grow to theirs,
  // and the forward moves exactly the compulsory words.
  const HeadShape s{257, 97, 16, 16};
  const int64_t whole = whole_problem_words(s);
  EXPECT_EQ(flash_tiles(s, whole, Pass::backward), (FlashTiles{257, 97, 257, 97}));
  EXPECT_EQ(flash_tiles(s, whole, Pass::forward), (FlashTiles{257, 97, 0, 0}));
  EXPECT_EQ(predict_flash_forward(s, flash_tiles(s, 10 * whole, Pass::forward)),
            (IoCount{257 * 16 + 97 * 32, 257 * 17}));
  // Largest-fitting outer tile with a small inner one before the cap (256 d words here).
  const FlashTiles mid = flash_tiles(s, 256 * 16, Pass::forward);
  EXPECT_LT(mid.block_q, 257);
  EXPECT_LE(mid.block_k, 16);
}

TEST(FlashIo, TileChoiceFitsAndIsMaximalForEveryCacheSize) {
  // Pure arithmetic, so every M in a range: the chosen tiles always fit, the outer ones are as large
  // as fits next to the chosen inner ones, and the inner ones stay small unless a cap was reached.
  for (const HeadShape& s : {HeadShape{1000, 1000, 8, 8}, HeadShape{300, 2000, 3, 17}, HeadShape{5, 5, 1, 1}}) {
    for (int64_t m = flash_min_cache_words(s, Pass::backward); m < 30000; m += 7) {
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        const FlashTiles t = flash_tiles(s, m, pass);
        ASSERT_LE(flash_resident_words(s, t, pass), m) << describe(s, m);
        ASSERT_GE(t.block_q, 1);
        ASSERT_LE(t.block_q, s.seqlen_q);
        ASSERT_LE(t.block_k, s.seqlen_k);
        if (t.block_q < s.seqlen_q) {
          ASSERT_LE(t.block_k, 16) << describe(s, m);
          FlashTiles more = t;
          ++more.block_q;
          ASSERT_GT(flash_resident_words(s, more, pass), m) << describe(s, m);
        }
      }
    }
  }
}

TEST(FlashIo, InnerTilesAreWholeKernelBlocksWhereTheOuterTileHasRoom) {
  // n = 4096, d = 128, M = 49152 (the default M of AVX-512 machines). Forward: a = 2 d + 2 = 258,
  // b = 2 d = 256, outer_1 = (M - b) / (a + 1) = 188, so outer_1 / 16 = 11 rows would split into
  // kernel blocks of 8 + 3; the rule takes 8, and the outer tile (M - 8 b) / (a + 8) = 177.
  const HeadShape s{4096, 4096, 128, 128};
  EXPECT_EQ(flash_tiles(s, 49152, Pass::forward), (FlashTiles{177, 8, 0, 0}));
  // Backward: dK/dV nest a = 4 d = 512, b = 2 d + 2 = 258, outer_1 = 95 (5 rows by the fraction);
  // dQ nest a = 3 d + 2 = 386, b = 256, outer_1 = 126 (7 rows). Both take one block of 8:
  // dK/dV outer (M - 8 b) / (a + 8) = 90, dQ outer (M - 8 b) / (a + 8) = 119.
  EXPECT_EQ(flash_tiles(s, 49152, Pass::backward), (FlashTiles{119, 8, 8, 90}));
  // Room for 256 outer rows or more: 16 (d = 64 forward, outer_1 = (M - 128) / 131 = 374).
  EXPECT_EQ(flash_tiles(HeadShape{4096, 4096, 64, 64}, 49152, Pass::forward).block_k, 16);
  // Below 64 outer rows (M near d^2) the fraction alone: d = 64, M = 4096, outer_1 = 30, inner 1.
  EXPECT_EQ(flash_tiles(HeadShape{4096, 4096, 64, 64}, 4096, Pass::forward), (FlashTiles{30, 1, 0, 0}));
  // Every M: an inner tile of 8 or more rows is a whole number of blocks unless the outer tile is
  // its whole sequence (then the inner tile takes the memory left).
  for (const HeadShape& shape : {HeadShape{1000, 1000, 8, 8}, HeadShape{700, 900, 40, 24}}) {
    for (int64_t m = flash_min_cache_words(shape, Pass::backward); m < 60000; m += 13) {
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        const FlashTiles t = flash_tiles(shape, m, pass);
        if (t.block_q < shape.seqlen_q && t.block_k >= 8) {
          ASSERT_EQ(t.block_k % 8, 0) << describe(shape, m);
        }
        if (pass == Pass::backward && t.dkdv_block_k < shape.seqlen_k && t.dkdv_block_q >= 8) {
          ASSERT_EQ(t.dkdv_block_q % 8, 0) << describe(shape, m);
        }
      }
    }
  }
}

// 4 d^2, then steps of 1.5x, and n d / 4.
std::vector<int64_t> large_cache_range(int64_t n, int64_t d) {
  std::vector<int64_t> sizes;
  for (int64_t m = 4 * d * d; m < n * d / 4; m = m * 3 / 2) sizes.push_back(m);
  sizes.push_back(n * d / 4);
  return sizes;
}

// The paper's claim for FlashAttention's backward in the large-cache range: I/O =
// Theta((n^2 d^2 + n d^3) / M) for 4 d^2 <= M <= n d / 4. With our exact prediction (equal to the
// count, above), the ratio to that formula stays within a factor 2 over the whole range.
// In words, and in lines x 16 (the words the lines carry): flash's rows are whole lines at these d,
// so the band is the same.
TEST(FlashIo, BackwardFollowsTheLargeCacheBound) {
  const int64_t n = 16384;
  for (const int64_t d : {32, 64, 128}) {
    const HeadShape s{n, n, d, d};
    const auto nd = static_cast<double>(n) * static_cast<double>(d);
    const double work = nd * nd + nd * static_cast<double>(d * d);  // n^2 d^2 + n d^3
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    double lines_lo = lo, lines_hi = 0.0;
    std::string line = "d = " + std::to_string(d) + ": predicted / ((n^2 d^2 + n d^3) / M) =";
    for (const int64_t m : large_cache_range(n, d)) {
      const FlashTiles tiles = flash_tiles(s, m, Pass::backward);
      const double predicted = static_cast<double>(predict_flash_backward(s, tiles).total());
      const double ratio = predicted / (work / static_cast<double>(m));
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
      const double lines = static_cast<double>(predict_dense_backward_lines(s, tiles, 16).total()) * 16.0;
      lines_lo = std::min(lines_lo, lines / (work / static_cast<double>(m)));
      lines_hi = std::max(lines_hi, lines / (work / static_cast<double>(m)));
      line += " " + std::to_string(ratio).substr(0, 5) + " (M " + std::to_string(m) + ")";
    }
    std::cout << line << "; max / min = " << hi / lo << "; in lines x 16: " << lines_lo << " to " << lines_hi
              << "\n";
    EXPECT_LE(hi / lo, 2.0) << line;
    EXPECT_LE(lines_hi / lines_lo, 2.0) << line;
  }
}

// The Saha-Ye forward bound n^2 d^2 / M, likewise.
TEST(FlashIo, ForwardFollowsTheLargeCacheBound) {
  const int64_t n = 16384;
  for (const int64_t d : {32, 64, 128}) {
    const HeadShape s{n, n, d, d};
    const auto nd = static_cast<double>(n) * static_cast<double>(d);
    double lo = std::numeric_limits<double>::infinity(), hi = 0.0;
    for (const int64_t m : large_cache_range(n, d)) {
      const double predicted = static_cast<double>(predict_flash_forward(s, flash_tiles(s, m, Pass::forward)).total());
      const double ratio = predicted / (nd * nd / static_cast<double>(m));
      lo = std::min(lo, ratio);
      hi = std::max(hi, ratio);
    }
    std::cout << "forward d = " << d << ": ratio to n^2 d^2 / M in [" << lo << ", " << hi << "]\n";
    EXPECT_LE(hi / lo, 2.0);
  }
}

}  // namespace
