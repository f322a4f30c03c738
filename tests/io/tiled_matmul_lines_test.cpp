// The tiled matrix product in lines: the line carry (tiled_matmul.hpp), counted lines == predicted
// lines, the carry's words in fast memory, and the tiles chosen with it.
#include "plan/matmul_tile_search.hpp"
#include "schedules/common/tiled_matmul.hpp"

#include "support/compare.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::testing::contains;
using spattn::testing::message_of;

using spattn::testing::random_floats;

// op(A) (a, k) and op(B) (k, b) as `layout` lays them out: A stored row-major (a, k) or as the
// transpose of a stored (k, a); B stored row-major (k, b) or as the transpose of a stored (b, k).
struct Product {
  int64_t a, k, b;
  MatmulLayout layout;
  std::vector<float> a_stored, b_stored;

  Product(int64_t rows, int64_t inner, int64_t cols, MatmulLayout how)
      : a(rows), k(inner), b(cols), layout(how), a_stored(random_floats(rows * inner, 1)),
        b_stored(random_floats(inner * cols, 2)) {}

  float a_at(int64_t i, int64_t p) const {
    return a_stored[static_cast<size_t>(layout.a_transposed ? p * a + i : i * k + p)];
  }
  float b_at(int64_t p, int64_t j) const {
    return b_stored[static_cast<size_t>(layout.b_transposed ? j * k + p : p * b + j)];
  }
  SlowMatrix<const float> a_view() const {
    return layout.a_transposed ? SlowMatrix<const float>::dense(a_stored.data(), k, a).transposed()
                               : SlowMatrix<const float>::dense(a_stored.data(), a, k);
  }
  SlowMatrix<const float> b_view() const {
    return layout.b_transposed ? SlowMatrix<const float>::dense(b_stored.data(), b, k).transposed()
                               : SlowMatrix<const float>::dense(b_stored.data(), k, b);
  }
  std::vector<double> expected() const {
    std::vector<double> c(static_cast<size_t>(a * b), 0.0);
    for (int64_t i = 0; i < a; ++i) {
      for (int64_t j = 0; j < b; ++j) {
        double sum = 0.0;
        for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a_at(i, p)) * b_at(p, j);
        c[static_cast<size_t>(i * b + j)] = sum;
      }
    }
    return c;
  }
};

struct CountedRun {
  std::vector<float> c;
  Ledger ledger;  // lines of 16 words
};

CountedRun run(const Product& product, const MatmulTiles& tiles, int64_t cache_words) {
  CountedRun out;
  out.c.assign(static_cast<size_t>(product.a * product.b), 123.0f);
  FastMemory fast(cache_words, &out.ledger, "tiled_matmul lines test");
  tiled_matmul(fast, {Operand::q, product.a_view()}, {Operand::k, product.b_view()},
               {Operand::s, SlowMatrix<float>::dense(out.c.data(), product.a, product.b)}, tiles);
  return out;
}

constexpr MatmulLayout kScores{false, true};  // S = Q K^T: both stored along k
constexpr MatmulLayout kRowMajor{false, false};
constexpr MatmulLayout kTransposedA{true, false};

}  // namespace

// A (2 x 20) row-major and B = Y^T for Y (3 x 20), chunks of 8: rows of 20 words, two lines each.
// Without a carry every chunk moves the line it starts in: chunks [0, 8), [8, 16), [16, 20) move
// lines 0, 0 and 1 of each row, 3 a row. With it, the chunk at 8 continues on the carried line 0:
// 2 a row, the row's own lines.
TEST(TiledMatmulLines, HandCountedCarryMovesEachRowsLinesOnce) {
  const Product product(2, 20, 3, kScores);
  MatmulTiles plain{2, 3, 8};
  MatmulTiles carried = plain;
  carried.carry_line_words = 16;
  carried.carry_a = carried.carry_b = true;

  const CountedRun without = run(product, plain, 1000);
  EXPECT_EQ(without.ledger.traffic(Operand::q, spattn::io::WordKind::value).reads, 40);
  EXPECT_EQ(without.ledger.lines(Operand::q, spattn::io::WordKind::value).reads, 2 * 3);
  EXPECT_EQ(without.ledger.lines(Operand::k, spattn::io::WordKind::value).reads, 3 * 3);

  const CountedRun with = run(product, carried, 1000);
  EXPECT_EQ(with.ledger.traffic(Operand::q, spattn::io::WordKind::value).reads, 40);  // the same words
  EXPECT_EQ(with.ledger.lines(Operand::q, spattn::io::WordKind::value).reads, 2 * 2);
  EXPECT_EQ(with.ledger.lines(Operand::k, spattn::io::WordKind::value).reads, 3 * 2);
  EXPECT_EQ(with.ledger.total_lines().writes, 2);  // C: two rows of 3 words
  EXPECT_EQ(predict_tiled_matmul_lines(2, 20, 3, carried, kScores, 16), (IoCount{10, 2}));
  EXPECT_EQ(predict_tiled_matmul_lines(2, 20, 3, plain, kScores, 16), (IoCount{15, 2}));
  // C 2 x 3, A chunk 2 x 8, B chunk 8 x 3, and a line per A row and per B column: 6 + 16 + 24 + 80.
  EXPECT_EQ(tiled_matmul_carry_words(carried), 80);
  EXPECT_EQ(with.ledger.peak_resident(), 126);
  EXPECT_EQ(tiled_matmul_fast_words(carried), 126);
  EXPECT_EQ(with.c, without.c);  // a carry changes the count, never the arithmetic
  const std::vector<double> expected = product.expected();
  EXPECT_LE(spattn::testing::max_abs_error(with.c, expected),
            spattn::testing::fp32_tolerance(20, spattn::testing::max_abs(expected)));
}

// Chosen tiles over odd sizes, every layout small_cache uses and M from a few lines to the whole
// product: counted lines == predicted, the peak == the predicted fast words (carry included), the
// product right; and some choices do carry.
TEST(TiledMatmulLines, ChosenTilesCountExactlyInLinesWithAndWithoutACarry) {
  const int64_t sizes[] = {1, 7, 97};
  const int64_t caches[] = {40, 200, 700, 3000, 30000};
  int carried = 0, plain = 0;
  for (const MatmulLayout layout : {kScores, kRowMajor, kTransposedA}) {
    for (int64_t a : sizes) {
      for (int64_t k : {int64_t{1}, int64_t{7}, int64_t{97}, int64_t{257}}) {
        for (int64_t b : sizes) {
          const Product product(a, k, b, layout);
          const std::vector<double> expected = product.expected();
          for (int64_t cache_words : caches) {
            const MatmulTiles tiles = choose_matmul_tiles(a, k, b, cache_words, 0, layout, 16);
            SCOPED_TRACE(::testing::Message()
                         << a << " x " << k << " x " << b << ", layout " << layout.a_transposed
                         << layout.b_transposed << ", M " << cache_words << ", tiles " << tiles.tile_m << "x"
                         << tiles.tile_n << "x" << tiles.tile_k << (tiles.carry_a ? " carry A" : "")
                         << (tiles.carry_b ? " carry B" : ""));
            const CountedRun counted = run(product, tiles, cache_words);
            const IoCount lines = predict_tiled_matmul_lines(a, k, b, tiles, layout, 16);
            EXPECT_EQ(counted.ledger.total_lines().reads, lines.reads);
            EXPECT_EQ(counted.ledger.total_lines().writes, lines.writes);
            EXPECT_EQ(counted.ledger.reads(), predict_tiled_matmul(a, k, b, tiles).reads);
            EXPECT_EQ(counted.ledger.peak_resident(), tiled_matmul_fast_words(tiles));
            EXPECT_LE(tiled_matmul_fast_words(tiles), cache_words);
            EXPECT_LE(spattn::testing::max_abs_error(counted.c, expected),
                      spattn::testing::fp32_tolerance(k, spattn::testing::max_abs(expected)));
            (tiles.carry_a || tiles.carry_b ? carried : plain) += 1;
          }
        }
      }
    }
  }
  EXPECT_GT(carried, 10);
  EXPECT_GT(plain, 10);
}

// A carry is taken where it moves fewer lines: small_cache's scores product (Q K^T, both stored
// along d) at n 512, d 64 and M 1024 gets tiles in M / 2 and the other half for the lines its
// copies read (carry_room): chunks of half a line with a carry, fewer lines than any tiles
// without one. Chunks below half a line never carry.
TEST(TiledMatmulLines, TheChoiceTakesACarryWhereItMovesFewerLines) {
  const MatmulTiles tiles = choose_matmul_tiles(512, 64, 512, 512, 0, kScores, 16, 512);
  EXPECT_TRUE(tiles.carry_a && tiles.carry_b) << tiles.tile_m << "x" << tiles.tile_n << "x" << tiles.tile_k;
  EXPECT_NE(tiles.tile_k % 16, 0);
  EXPECT_GE(2 * tiles.tile_k, 16);
  const MatmulTiles without = choose_matmul_tiles(512, 64, 512, 512, 0, kScores, 16, 0);
  EXPECT_LT(predict_tiled_matmul_lines(512, 64, 512, tiles, kScores, 16).total(),
            predict_tiled_matmul_lines(512, 64, 512, without, kScores, 16).total());
  EXPECT_LE(tiled_matmul_fast_words(tiles), 1024);
  EXPECT_LE(tiled_matmul_fast_words(tiles) - tiled_matmul_carry_words(tiles), 512);
  for (int64_t cache_words : {40, 100, 300, 1000, 3000}) {
    const MatmulTiles chosen = choose_matmul_tiles(97, 257, 97, cache_words, 0, kScores, 16, cache_words);
    if (chosen.carry_a || chosen.carry_b) {
      EXPECT_GE(2 * chosen.tile_k, 16) << cache_words;
    }
  }
}

// From the tall cache on (M >= 4 L^2 = 1024) the choice moves the fewest lines of all tiles that
// fit, found by searching every tile and chunk, with and without a carry (a carry only for chunks
// of at least half a line, as the choice allows): small_cache's split, tiles in M / 2 and the
// other half as carry room, for each layout, odd sizes and hook rows. Without the widest tiles
// that leave room for a carry the choice moved up to 7 % more lines at M = 2048 (n 512, d 64 and
// 128; here 97 x 40 x 97 row-major). Below the tall cache the fewest lines take tiles narrower
// than a line, which the choice leaves out (tiled_matmul.cpp).
TEST(TiledMatmulLines, TheChoiceMovesTheFewestLinesOfAllTilesThatFit) {
  constexpr int64_t kLine = 16;
  struct Shape { int64_t a, k, b, row_words; };
  for (const Shape shape : {Shape{97, 40, 97, 1}, Shape{33, 70, 21, 0}}) {
    for (const MatmulLayout layout : {kScores, kRowMajor, kTransposedA}) {
      for (const int64_t cache_words : {1024, 2048, 4096}) {
        const int64_t budget = cache_words / 2;
        const int64_t room = cache_words - budget;
        const MatmulTiles chosen =
            choose_matmul_tiles(shape.a, shape.k, shape.b, budget, shape.row_words, layout, kLine, room);
        const int64_t chosen_lines =
            predict_tiled_matmul_lines(shape.a, shape.k, shape.b, chosen, layout, kLine).total();
        int64_t fewest = -1;
        MatmulTiles best;
        for (int64_t m = 1; m <= shape.a; ++m) {
          for (int64_t k = 1; k <= shape.k; ++k) {
            for (int64_t n = 1; n <= shape.b; ++n) {
              for (const bool carry : {false, true}) {
                MatmulTiles tiles{m, n, k};
                if (carry) {
                  tiles.carry_a = !layout.a_transposed;
                  tiles.carry_b = layout.b_transposed;
                  if ((!tiles.carry_a && !tiles.carry_b) || k >= shape.k || k % kLine == 0 || 2 * k < kLine) continue;
                  tiles.carry_line_words = kLine;
                }
                const int64_t carry_words = tiled_matmul_carry_words(tiles);
                const int64_t left = budget - (tiled_matmul_fast_words(tiles) - carry_words) - shape.row_words * m;
                if (left < 0 || carry_words > left + room) continue;
                const int64_t lines = predict_tiled_matmul_lines(shape.a, shape.k, shape.b, tiles, layout, kLine).total();
                if (fewest < 0 || lines < fewest) {
                  fewest = lines;
                  best = tiles;
                }
              }
            }
          }
        }
        ASSERT_GT(fewest, 0);
        EXPECT_EQ(chosen_lines, fewest)
            << shape.a << "x" << shape.k << "x" << shape.b << " layout " << layout.a_transposed
            << layout.b_transposed << " M " << cache_words << ": chose " << chosen.tile_m << "x"
            << chosen.tile_n << "x" << chosen.tile_k << (chosen.carry_line_words ? "+carry" : "") << ", fewest "
            << best.tile_m << "x" << best.tile_n << "x" << best.tile_k << (best.carry_line_words ? "+carry" : "");
      }
    }
  }
}

TEST(TiledMatmulLines, ACarryOfAnOperandNotStoredAlongKIsRejectedBeforeAnythingIsWritten) {
  const Product product(4, 20, 3, kTransposedA);
  std::vector<float> c(12, 7.0f);
  FastMemory fast(1000, nullptr, "test");
  MatmulTiles tiles{2, 3, 8};
  tiles.carry_line_words = 16;
  tiles.carry_a = true;
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
    tiled_matmul(fast, {Operand::q, product.a_view()}, {Operand::k, product.b_view()},
                 {Operand::s, SlowMatrix<float>::dense(c.data(), 4, 3)}, tiles);
  }), "tiled_matmul: the tiles carry lines of op(A), which is not stored along k"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
    predict_tiled_matmul_lines(4, 20, 3, tiles, kTransposedA, 16);
  }), "predict_tiled_matmul_lines: the tiles carry lines of op(A), which this layout does not store along k"));
  tiles.carry_line_words = 0;
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
    predict_tiled_matmul_lines(4, 20, 3, tiles, kRowMajor, 16);
  }), "a line carry needs its line size, got carry_line_words 0"));
  EXPECT_EQ(c, std::vector<float>(12, 7.0f));
  EXPECT_EQ(fast.resident(), 0);
}
