// The tiled matrix product: results, exact word counts (counted == predicted), residency, tile
// choice and validation.
#include "plan/matmul_tile_search.hpp"
#include "schedules/common/tiled_matmul.hpp"

#include "support/compare.hpp"

#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::io::WordKind;

// The message of the Error that f throws ("<no error>" when it throws none).
using spattn::testing::message_of;
using spattn::testing::contains;
std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = dist(rng);
  return x;
}

// C = alpha A B in double, A (a, k) and B (k, b) row-major.
std::vector<double> naive_product(const std::vector<float>& a, const std::vector<float>& b,
                                  int64_t rows, int64_t inner, int64_t cols, double alpha) {
  std::vector<double> c(static_cast<size_t>(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < inner; ++p) {
        sum += static_cast<double>(a[static_cast<size_t>(i * inner + p)]) *
               static_cast<double>(b[static_cast<size_t>(p * cols + j)]);
      }
      c[static_cast<size_t>(i * cols + j)] = alpha * sum;
    }
  }
  return c;
}

struct ProductRun {
  std::vector<float> c;
  Ledger ledger;
};

ProductRun run_product(const std::vector<float>& a, const std::vector<float>& b, int64_t rows,
                int64_t inner, int64_t cols, const MatmulTiles& tiles, int64_t cache_words,
                float alpha = 1.0f) {
  ProductRun run;
  run.c.assign(static_cast<size_t>(rows * cols), 123.0f);  // must all be overwritten
  FastMemory fast(cache_words, &run.ledger, "tiled_matmul test");
  tiled_matmul(fast, {Operand::q, SlowMatrix<const float>::dense(a.data(), rows, inner)},
               {Operand::k, SlowMatrix<const float>::dense(b.data(), inner, cols)},
               {Operand::s, SlowMatrix<float>::dense(run.c.data(), rows, cols)}, tiles,
               {alpha, false, nullptr});
  return run;
}

TEST(TiledMatmul, HandCheckedTwoByThreeTimesThreeByTwoWithOneWordTiles) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};        // (2, 3)
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};     // (3, 2)
  const ProductRun run = run_product(a, b, 2, 3, 2, {1, 1, 1}, 3);
  EXPECT_EQ(run.c, (std::vector<float>{58, 64, 139, 154}));
  // 4 output tiles; each reads its row of A (3) and column of B (3): 24 reads, 4 writes.
  EXPECT_EQ(run.ledger.traffic(Operand::q, WordKind::value).reads, 12);
  EXPECT_EQ(run.ledger.traffic(Operand::k, WordKind::value).reads, 12);
  EXPECT_EQ(run.ledger.traffic(Operand::s, WordKind::value).writes, 4);
  EXPECT_EQ(run.ledger.peak_resident(), 3);
  EXPECT_EQ(predict_tiled_matmul(2, 3, 2, {1, 1, 1}), (IoCount{24, 4}));
}

TEST(TiledMatmul, WholeProductInOneTileReadsEveryWordOnce) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};
  const ProductRun run = run_product(a, b, 2, 3, 2, {2, 2, 3}, 16, 0.5f);
  EXPECT_EQ(run.c, (std::vector<float>{29, 32, 69.5f, 77}));
  EXPECT_EQ(run.ledger.reads(), 12);
  EXPECT_EQ(run.ledger.writes(), 4);
  EXPECT_EQ(run.ledger.peak_resident(), 4 + 6 + 6);
}

TEST(TiledMatmul, RetainedAPanelIsLoadedOncePerRowBlock) {
  // k = 3 fits in one chunk: A (2 x 3) is read once although there are 2 column blocks.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};
  const ProductRun run = run_product(a, b, 2, 3, 2, {2, 1, 3}, 11);
  EXPECT_EQ(run.c, (std::vector<float>{58, 64, 139, 154}));
  EXPECT_EQ(run.ledger.traffic(Operand::q, WordKind::value).reads, 6);
  EXPECT_EQ(run.ledger.traffic(Operand::k, WordKind::value).reads, 6);
  EXPECT_EQ(predict_tiled_matmul(2, 3, 2, {2, 1, 3}), (IoCount{12, 4}));
}

TEST(TiledMatmul, TransposedViewsGiveTransposedOperandsWithoutCopies) {
  // Stored At (3, 2) and Bt (2, 3); the product uses At^T (2, 3) and Bt^T (3, 2).
  const std::vector<float> at = {1, 4, 2, 5, 3, 6};
  const std::vector<float> bt = {7, 9, 11, 8, 10, 12};
  std::vector<float> c(4, -1.0f);
  Ledger ledger;
  FastMemory fast(8, &ledger, "test");
  const MatmulTiles tiles{1, 2, 2};
  tiled_matmul(fast, {Operand::a1, SlowMatrix<const float>::dense(at.data(), 3, 2).transposed()},
               {Operand::k, SlowMatrix<const float>::dense(bt.data(), 2, 3).transposed()},
               {Operand::g, SlowMatrix<float>::dense(c.data(), 2, 2)}, tiles);
  EXPECT_EQ(c, (std::vector<float>{58, 64, 139, 154}));
  const IoCount predicted = predict_tiled_matmul(2, 3, 2, tiles);
  EXPECT_EQ(ledger.reads(), predicted.reads);
  EXPECT_EQ(ledger.writes(), predicted.writes);
  EXPECT_EQ(ledger.traffic(Operand::a1, WordKind::value).reads, 6);  // one column block
}

TEST(TiledMatmul, OddSizesAndTilesThatDoNotDivideThemCountExactlyAsPredicted) {
  const int64_t sizes[] = {1, 7, 97};
  const int64_t caches[] = {3, 5, 20, 64, 400, 30000};
  for (int64_t rows : sizes) {
    for (int64_t inner : sizes) {
      for (int64_t cols : sizes) {
        const auto a = random_matrix(rows, inner, 1);
        const auto b = random_matrix(inner, cols, 2);
        const auto expected = naive_product(a, b, rows, inner, cols, -0.75);
        const double tolerance =
            spattn::testing::fp32_tolerance(inner, spattn::testing::max_abs(expected));
        for (int64_t cache_words : caches) {
          const MatmulTiles tiles = choose_matmul_tiles(rows, inner, cols, cache_words);
          SCOPED_TRACE(::testing::Message() << rows << " x " << inner << " x " << cols << ", M "
                                            << cache_words << ", tiles " << tiles.tile_m << " x "
                                            << tiles.tile_n << " x " << tiles.tile_k);
          const ProductRun run = run_product(a, b, rows, inner, cols, tiles, cache_words, -0.75f);
          EXPECT_LE(spattn::testing::max_abs_error(run.c, expected), tolerance);
          const IoCount predicted = predict_tiled_matmul(rows, inner, cols, tiles);
          EXPECT_EQ(run.ledger.reads(), predicted.reads);
          EXPECT_EQ(run.ledger.writes(), predicted.writes);
          EXPECT_EQ(run.ledger.peak_resident(), tiled_matmul_fast_words(tiles));
          EXPECT_LE(run.ledger.peak_resident(), cache_words);
        }
      }
    }
  }
}

TEST(TiledMatmul, HandPickedTilesOfEveryKindCountExactly) {
  const int64_t rows = 13, inner = 11, cols = 9;
  const auto a = random_matrix(rows, inner, 3);
  const auto b = random_matrix(inner, cols, 4);
  const auto expected = naive_product(a, b, rows, inner, cols, 1.0);
  const MatmulTiles cases[] = {{1, 1, 1}, {4, 3, 2}, {5, 9, 11}, {13, 2, 4}, {2, 13, 12}, {20, 20, 20}};
  for (const MatmulTiles& tiles : cases) {
    const ProductRun run = run_product(a, b, rows, inner, cols, tiles, tiled_matmul_fast_words(tiles));
    EXPECT_LE(spattn::testing::max_abs_error(run.c, expected),
              spattn::testing::fp32_tolerance(inner, spattn::testing::max_abs(expected)));
    EXPECT_EQ(run.ledger.reads(), predict_tiled_matmul(rows, inner, cols, tiles).reads);
    EXPECT_EQ(run.ledger.writes(), rows * cols);
  }
}

TEST(TiledMatmul, EmptyInnerDimensionWritesZerosAndReadsNothing) {
  const std::vector<float> none;
  const ProductRun run = run_product(none, none, 3, 0, 2, {2, 2, 1}, 8);
  EXPECT_EQ(run.c, std::vector<float>(6, 0.0f));
  EXPECT_EQ(run.ledger.reads(), 0);
  EXPECT_EQ(run.ledger.writes(), 6);
  EXPECT_EQ(predict_tiled_matmul(3, 0, 2, {2, 2, 1}), (IoCount{0, 6}));
  EXPECT_EQ(predict_tiled_matmul(0, 5, 4, {2, 2, 1}), (IoCount{0, 0}));
  EXPECT_EQ(predict_tiled_matmul(4, 5, 0, {2, 2, 1}), (IoCount{0, 0}));
}

TEST(TiledMatmul, AccumulateReadsTheOutputOnceAndAddsTheScaledProduct) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};
  std::vector<float> c = {1, 2, 3, 4};
  Ledger ledger;
  FastMemory fast(8, &ledger, "test");
  const MatmulTiles tiles{1, 2, 2};
  tiled_matmul(fast, {Operand::q, SlowMatrix<const float>::dense(a.data(), 2, 3)},
               {Operand::k, SlowMatrix<const float>::dense(b.data(), 3, 2)},
               {Operand::g, SlowMatrix<float>::dense(c.data(), 2, 2)}, tiles, {2.0f, true, nullptr});
  EXPECT_EQ(c, (std::vector<float>{117, 130, 281, 312}));
  EXPECT_EQ(ledger.traffic(Operand::g, WordKind::value).reads, 4);
  const IoCount predicted = predict_tiled_matmul(2, 3, 2, tiles, true);
  EXPECT_EQ(ledger.reads(), predicted.reads);
  EXPECT_EQ(ledger.writes(), predicted.writes);
}

// Squares A on load, adds a per-row value (loaded at each row block) to each finished tile, and
// records the order of the calls.
class TestHooks final : public MatmulHooks {
 public:
  TestHooks(FastMemory& fast, SlowMatrix<const float> row_values, int64_t tile_m)
      : row_values_(row_values), rows_(fast.allocate<float>(tile_m, "row values")) {}
  void begin_row_block(FastMemory& fast, int64_t row0, int64_t rows) override {
    fast.load(Operand::other, row_values_, row0, 0, rows, 1, rows_, 0, 1);
    ++row_blocks;
  }
  void transform_a(int64_t, int64_t, int64_t rows, int64_t cols, float* chunk, int64_t ld) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) chunk[r * ld + c] *= chunk[r * ld + c];
    }
  }
  void finish_tile(FastMemory&, int64_t, int64_t, int64_t rows, int64_t cols, float* tile,
                   int64_t ld, spattn::io::FastBuffer<float>& scratch) override {
    EXPECT_GE(scratch.words(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) tile[r * ld + c] += rows_[r];
    }
  }
  void end_row_block(FastMemory&, int64_t, int64_t) override { ++ended; }
  int row_blocks = 0;
  int ended = 0;

 private:
  SlowMatrix<const float> row_values_;
  spattn::io::FastBuffer<float> rows_;
};

TEST(TiledMatmul, HooksTransformLoadsAndFinishTilesWithTheirOwnCountedLoads) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6};        // squared: {1, 4, 9, 16, 25, 36}
  const std::vector<float> b = {7, 8, 9, 10, 11, 12};
  const std::vector<float> row_values = {100, 200};
  std::vector<float> c(4, 0.0f);
  Ledger ledger;
  FastMemory fast(4, &ledger, "test");
  TestHooks hooks(fast, SlowMatrix<const float>::dense(row_values.data(), 2, 1), 1);
  tiled_matmul(fast, {Operand::q, SlowMatrix<const float>::dense(a.data(), 2, 3)},
               {Operand::k, SlowMatrix<const float>::dense(b.data(), 3, 2)},
               {Operand::s, SlowMatrix<float>::dense(c.data(), 2, 2)}, {1, 1, 1},
               {1.0f, false, &hooks});
  EXPECT_EQ(c, (std::vector<float>{7 + 36 + 99 + 100, 8 + 40 + 108 + 100,
                                    112 + 225 + 396 + 200, 128 + 250 + 432 + 200}));
  EXPECT_EQ(hooks.row_blocks, 2);
  EXPECT_EQ(hooks.ended, 2);
  EXPECT_EQ(ledger.traffic(Operand::other, WordKind::value).reads, 2);
  EXPECT_EQ(ledger.reads() - 2, predict_tiled_matmul(2, 3, 2, {1, 1, 1}).reads);
  EXPECT_EQ(ledger.peak_resident(), 4);
}

TEST(TiledMatmul, ChosenTilesMinimizeThePredictedReadsAmongAllThatFit) {
  // Brute force over every tile triple that fits, for small products.
  const int64_t sizes[] = {1, 3, 7, 12};
  for (int64_t rows : sizes) {
    for (int64_t inner : sizes) {
      for (int64_t cols : sizes) {
        for (int64_t cache_words : {3, 4, 9, 17, 40, 100}) {
          for (int64_t row_words : {0, 2}) {
            if (cache_words < tiled_matmul_min_cache_words(row_words)) continue;
            const MatmulTiles chosen =
                choose_matmul_tiles(rows, inner, cols, cache_words, row_words);
            const int64_t chosen_reads = predict_tiled_matmul(rows, inner, cols, chosen).reads;
            ASSERT_LE(tiled_matmul_fast_words(chosen) + row_words * chosen.tile_m, cache_words);
            for (int64_t tm = 1; tm <= rows; ++tm) {
              for (int64_t tn = 1; tn <= cols; ++tn) {
                for (int64_t tk = 1; tk <= inner; ++tk) {
                  const MatmulTiles t{tm, tn, tk};
                  if (tiled_matmul_fast_words(t) + row_words * tm > cache_words) continue;
                  ASSERT_GE(predict_tiled_matmul(rows, inner, cols, t).reads, chosen_reads)
                      << rows << " x " << inner << " x " << cols << " M " << cache_words << " tiles "
                      << tm << " " << tn << " " << tk;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST(TiledMatmul, SquareProductsGetTilesOfAboutSqrtM) {
  for (int64_t cache_words : {16, 100, 1000, 10000}) {
    const MatmulTiles tiles = choose_matmul_tiles(2000, 2000, 2000, cache_words);
    // Within a few percent of sqrt(M): the widest tile, then split evenly over its blocks
    // (2000 = 21 blocks of 96 at M = 10000, the memory left over going to the chunk).
    const double root = std::sqrt(static_cast<double>(cache_words));
    EXPECT_GE(static_cast<double>(tiles.tile_m), 0.95 * root - 2.0) << cache_words;
    EXPECT_GE(static_cast<double>(tiles.tile_n), 0.95 * root - 2.0) << cache_words;
    EXPECT_LE(tiled_matmul_fast_words(tiles), cache_words);
  }
  // A short inner dimension keeps the A panel: S = Q K^T with d = 4 and M = 1000.
  EXPECT_EQ(choose_matmul_tiles(1000, 4, 1000, 1000).tile_k, 4);
  // A narrow output takes the whole width: dQ = dS K with d = 8 and M = 1000.
  EXPECT_EQ(choose_matmul_tiles(1000, 1000, 8, 1000).tile_n, 8);
}

TEST(TiledMatmul, CacheBelowTheMinimumIsRejectedNamingIt) {
  using spattn::InvalidArgument;
  EXPECT_TRUE(contains(message_of<InvalidArgument>([] { choose_matmul_tiles(4, 4, 4, 2); }),
                       "fast memory M = 2 words is below the minimum 3"));
  EXPECT_TRUE(contains(message_of<InvalidArgument>([] { choose_matmul_tiles(4, 4, 4, 4, 2); }),
                       "minimum 5"));
  EXPECT_TRUE(contains(message_of<InvalidArgument>([] { choose_matmul_tiles(-1, 4, 4, 100); }),
                       "got a -1"));
}

TEST(TiledMatmul, MismatchedShapesAndBadTilesAreRejectedBeforeAnythingIsWritten) {
  const std::vector<float> a(6, 1.0f), b(6, 1.0f);
  std::vector<float> c(4, 7.0f);
  FastMemory fast(100, nullptr, "test");
  const MatmulInput in_a{Operand::q, SlowMatrix<const float>::dense(a.data(), 2, 3)};
  using spattn::InvalidArgument;
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
    tiled_matmul(fast, in_a, {Operand::k, SlowMatrix<const float>::dense(b.data(), 2, 3)},
                 {Operand::s, SlowMatrix<float>::dense(c.data(), 2, 2)}, {1, 1, 1});
  }), "tiled_matmul: op(A) is 2 x 3 but op(B) is 2 x 3 (inner dimensions differ)"));
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
    tiled_matmul(fast, in_a, {Operand::k, SlowMatrix<const float>::dense(b.data(), 3, 2)},
                 {Operand::s, SlowMatrix<float>::dense(c.data(), 1, 4)}, {1, 1, 1});
  }), "tiled_matmul: C is 1 x 4, op(A) op(B) is 2 x 2"));
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
    tiled_matmul(fast, in_a, {Operand::k, SlowMatrix<const float>::dense(b.data(), 3, 2)},
                 {Operand::s, SlowMatrix<float>::dense(c.data(), 2, 2)}, {1, 0, 1});
  }), "tiles must be at least 1, got tile_m 1, tile_n 0, tile_k 1"));
  EXPECT_EQ(c, std::vector<float>(4, 7.0f));
  EXPECT_EQ(fast.resident(), 0);
}

TEST(TiledMatmul, TilesThatDoNotFitStopWithTheCapacityError) {
  const std::vector<float> a(6, 1.0f), b(6, 1.0f);
  std::vector<float> c(4, 7.0f);
  FastMemory fast(10, nullptr, "test");
  EXPECT_THROW(
      tiled_matmul(fast, {Operand::q, SlowMatrix<const float>::dense(a.data(), 2, 3)},
                   {Operand::k, SlowMatrix<const float>::dense(b.data(), 3, 2)},
                   {Operand::s, SlowMatrix<float>::dense(c.data(), 2, 2)}, {2, 2, 3}),
      spattn::RuntimeError);
  EXPECT_EQ(c, std::vector<float>(4, 7.0f));
}

}  // namespace
