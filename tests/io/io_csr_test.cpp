// CSR inputs in the I/O model (io.hpp, "CSR inputs"): a load scatters the tile's entries into the
// zeroed fast tile and counts its nonzeros as values and its row pointers, column indices, search
// probes and stop words as index words. Hand-checked cases, then every tile of a random matrix
// (both orientations) against the independent formula csr_tile_words and the dense tile.
#include <spattn/io.hpp>

#include "support/sparse_inputs_fixtures.hpp"

#include <sparse_formats/convert.hpp>

#include <gtest/gtest.h>

#include <vector>

using namespace spattn::io;

namespace {

// 3 x 6: row 0 = {0: 1, 2: 2, 5: 3}, row 1 empty, row 2 = {1: 4, 2: 5, 3: 6, 4: 7}.
struct Small {
  std::vector<int64_t> row_ptr{0, 3, 3, 7};
  std::vector<int64_t> col_idx{0, 2, 5, 1, 2, 3, 4};
  std::vector<float> values{1, 2, 3, 4, 5, 6, 7};
  SlowMatrix<const float>::Csr view() const { return {{3, 6, row_ptr.data(), col_idx.data()}, values.data()}; }
};

// Loads a tile counted; returns the ledger and the tile (rows x cols, leading dimension cols).
struct Loaded {
  Ledger ledger;
  std::vector<float> tile;
};
Loaded load(const SlowMatrix<const float>& m, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
            int64_t line_words = kDefaultLineWords) {
  Loaded out{Ledger(line_words), {}};
  FastMemory fast(1000, &out.ledger, "io_csr_test");
  auto tile = fast.allocate<float>(rows * cols, "tile");
  for (int64_t i = 0; i < rows * cols; ++i) tile[i] = -99.0f;  // stale words must be cleared
  fast.load(Operand::k, m, row0, col0, rows, cols, tile, 0, cols);
  out.tile.assign(tile.data(), tile.data() + rows * cols);
  return out;
}

}  // namespace

TEST(CsrLoad, SearchProbesDependOnTheRowLengthOnly) {
  EXPECT_EQ(csr_search_probes(0), 0);
  EXPECT_EQ(csr_search_probes(1), 1);
  EXPECT_EQ(csr_search_probes(2), 2);
  EXPECT_EQ(csr_search_probes(3), 3);
  EXPECT_EQ(csr_search_probes(4), 3);
  EXPECT_EQ(csr_search_probes(5), 4);
  EXPECT_EQ(csr_search_probes(8), 4);
  EXPECT_EQ(csr_search_probes(9), 5);
}

TEST(CsrLoad, FullWidthTileReadsRowPointersAndEveryEntry) {
  const Small s;
  const auto m = SlowMatrix<const float>::csr(s.view());
  const Loaded out = load(m, 0, 0, 3, 6);
  EXPECT_EQ(out.tile, (std::vector<float>{1, 0, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 5, 6, 7, 0}));
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::value).reads, 7);
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::index).reads, 4 + 7);  // row_ptr[0..3], 7 columns
}

TEST(CsrLoad, ColumnRangeSearchesEachRowAndStopsPastTheRange) {
  const Small s;
  const auto m = SlowMatrix<const float>::csr(s.view());
  // Columns [2, 4): row 0 searches 3 entries (3 probes), reads column 2 (in) and 5 (stop); row 1
  // is empty; row 2 searches 4 entries (3 probes), reads 2, 3 (in) and 4 (stop).
  const Loaded out = load(m, 0, 2, 3, 2);
  EXPECT_EQ(out.tile, (std::vector<float>{2, 0, 0, 0, 5, 6}));
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::value).reads, 3);
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::index).reads, 4 + (3 + 2) + 0 + (3 + 3));
  EXPECT_EQ(csr_tile_words(s.view(), 0, 3, 2, 2).indices, 15);
  // Columns [0, 2) of row 2 only: no search (the range starts at 0), column 1 in, column 2 stops.
  const Loaded first = load(m, 2, 0, 1, 2);
  EXPECT_EQ(first.tile, (std::vector<float>{0, 4}));
  EXPECT_EQ(first.ledger.traffic(Operand::k, WordKind::index).reads, 2 + 2);
  EXPECT_EQ(first.ledger.traffic(Operand::k, WordKind::value).reads, 1);
  EXPECT_EQ(first.ledger.total(WordKind::value).reads, 1);  // booked to K only
}

TEST(CsrLoad, TransposedViewLoadsTheSameStoredTileTransposed) {
  const Small s;
  const auto t = SlowMatrix<const float>::csr(s.view()).transposed();  // 6 x 3
  EXPECT_EQ(t.rows(), 6);
  EXPECT_EQ(t.cols(), 3);
  const Loaded out = load(t, 2, 0, 2, 3);  // stored columns [2, 4) of rows [0, 3)
  EXPECT_EQ(out.tile, (std::vector<float>{2, 0, 5, 0, 0, 6}));
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::index).reads, 15);
  EXPECT_EQ(out.ledger.traffic(Operand::k, WordKind::value).reads, 3);
}

TEST(CsrLoad, EmptyTilesMoveNothing) {
  const Small s;
  const auto m = SlowMatrix<const float>::csr(s.view());
  EXPECT_EQ(load(m, 1, 0, 0, 6).ledger.reads(), 0);
  EXPECT_EQ(load(m, 0, 3, 3, 0).ledger.reads(), 0);
  EXPECT_EQ(load(m, 1, 0, 1, 6).ledger.reads(), 2);  // an empty row: its two row pointers
}

// Every tile of a random 9 x 13 matrix (a third of the entries, rows 0 and 4 empty), both
// orientations: the loaded tile is the dense tile, and the count is csr_tile_words, in words and
// in lines of 1, 3 and 16 words (lines of 1 word are words).
TEST(CsrLoad, EveryTileMatchesTheFormulaAndTheDenseTile) {
  auto input = spattn::testing::sparse_input(9, 13, 0.35, 21, 4);
  for (int64_t c = 0; c < 13; ++c) input.dense[static_cast<size_t>(c)] = 0.0f;
  input.csr = sparse_formats::dense_to_csr<int64_t, float>(input.dense.data(), 9, 13);
  const auto view = input.csr.view();
  const auto csr = SlowMatrix<const float>::csr(view);
  const auto dense = SlowMatrix<const float>::dense(input.dense.data(), 9, 13);
  int64_t tiles = 0;
  for (int64_t row0 = 0; row0 < 9; ++row0) {
    for (int64_t rows = 1; row0 + rows <= 9; ++rows) {
      for (int64_t col0 = 0; col0 < 13; ++col0) {
        for (int64_t cols = 1; col0 + cols <= 13; ++cols) {
          SCOPED_TRACE(::testing::Message() << "rows [" << row0 << ", " << row0 + rows << ") cols [" << col0
                                            << ", " << col0 + cols << ")");
          const CsrTileWords words = csr_tile_words(view, row0, rows, col0, cols);
          const Loaded got = load(csr, row0, col0, rows, cols);
          ASSERT_EQ(got.tile, load(dense, row0, col0, rows, cols).tile);
          ASSERT_EQ(got.ledger.traffic(Operand::k, WordKind::value).reads, words.values);
          ASSERT_EQ(got.ledger.traffic(Operand::k, WordKind::index).reads, words.indices);
          const Loaded got_t = load(csr.transposed(), col0, row0, cols, rows);
          ASSERT_EQ(got_t.tile, load(dense.transposed(), col0, row0, cols, rows).tile);
          ASSERT_EQ(got_t.ledger.traffic(Operand::k, WordKind::index).reads, words.indices);
          for (int64_t line : {1, 2, 3, 8, 16, 32}) {
            const CsrTileWords lines = csr_tile_words(view, row0, rows, col0, cols, line);
            const Loaded counted = load(csr, row0, col0, rows, cols, line);
            ASSERT_EQ(counted.ledger.lines(Operand::k, WordKind::value).reads, lines.value_lines) << "L " << line;
            ASSERT_EQ(counted.ledger.lines(Operand::k, WordKind::index).reads, lines.index_lines) << "L " << line;
            const Loaded counted_t = load(csr.transposed(), col0, row0, cols, rows, line);
            ASSERT_EQ(counted_t.ledger.lines(Operand::k, WordKind::index).reads, lines.index_lines) << "L " << line;
            if (line == 1) {
              ASSERT_EQ(lines.value_lines, words.values);
              ASSERT_LE(lines.index_lines, words.indices);  // a probe and the scan may read a word twice
            }
          }
          ++tiles;
        }
      }
    }
  }
  EXPECT_EQ(tiles, 45 * 91);
  EXPECT_GT(input.csr.nnz(), 20);
}
