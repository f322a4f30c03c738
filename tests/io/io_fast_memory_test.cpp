// The fast-memory model: moves are counted exactly, residency is tracked, capacity is enforced.
#include <spattn/io.hpp>

#include <spattn/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

using namespace spattn::io;

TEST(FastMemory, LoadAndStoreCountEveryWordAndCopyTheTile) {
  std::vector<float> slow(6 * 5);
  std::iota(slow.begin(), slow.end(), 0.0f);  // slow(r, c) = 5 r + c
  const auto matrix = SlowMatrix<float>::dense(slow.data(), 6, 5);
  Ledger ledger;
  FastMemory fast(100, &ledger, "test");
  auto tile = fast.allocate<float>(12, "tile");
  fast.load(Operand::k, SlowMatrix<const float>(slow.data(), 6, 5, 5), 2, 1, 3, 4, tile, 0, 4);
  EXPECT_EQ(tile[0], 11.0f);   // (2, 1)
  EXPECT_EQ(tile[11], 24.0f);  // (4, 4)
  EXPECT_EQ(ledger.traffic(Operand::k, WordKind::value).reads, 12);
  tile[0] = -1.0f;
  fast.store(Operand::dk, tile, 0, 4, matrix, 0, 0, 1, 2);
  EXPECT_EQ(slow[0], -1.0f);
  EXPECT_EQ(slow[1], 12.0f);
  EXPECT_EQ(ledger.traffic(Operand::dk, WordKind::value).writes, 2);
  EXPECT_EQ(ledger.reads(), 12);
  EXPECT_EQ(ledger.writes(), 2);
  EXPECT_EQ(ledger.peak_resident(), 12);
}

// The one-element moves count exactly what load / store of a 1 x 1 tile count, with the word
// kind given, and read strided and transposed views at the right element.
TEST(FastMemory, OneWordMovesCountOneWordOfTheirKind) {
  std::vector<int64_t> slow = {10, 11, 12, 13, 14, 15};  // 2 x 3
  const SlowMatrix<const int64_t> view(slow.data(), 2, 3, 3);
  Ledger ledger;
  FastMemory fast(10, &ledger, "test");
  auto words = fast.allocate<int64_t>(3, "words");
  fast.load_word(Operand::mask, view, 1, 2, words, 0, WordKind::index);
  fast.load_word(Operand::mask, view.transposed(), 2, 0, words, 1, WordKind::index);  // (0, 2)
  fast.load_word(Operand::s, view, 0, 1, words, 2);
  EXPECT_EQ(std::vector<int64_t>(words.data(), words.data() + 3), (std::vector<int64_t>{15, 12, 11}));
  EXPECT_EQ(ledger.traffic(Operand::mask, WordKind::index).reads, 2);
  EXPECT_EQ(ledger.traffic(Operand::s, WordKind::value).reads, 1);
  std::vector<float> out(4, 0.0f);
  auto value = fast.allocate<float>(1, "value");
  value[0] = 2.5f;
  fast.store_word(Operand::p, value, 0, SlowMatrix<float>::dense(out.data(), 2, 2), 1, 0);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 2.5f, 0.0f}));
  EXPECT_EQ(ledger.traffic(Operand::p, WordKind::value).writes, 1);
  EXPECT_EQ(ledger.reads(), 3);
  EXPECT_EQ(ledger.writes(), 1);
}

TEST(FastMemory, TransposedViewLoadsColumns) {
  std::vector<float> slow = {1, 2, 3, 4, 5, 6};  // 2 x 3
  const auto t = SlowMatrix<const float>(slow.data(), 2, 3, 3).transposed();  // 3 x 2
  FastMemory fast(10, nullptr, "test");
  auto tile = fast.allocate<float>(6, "tile");
  fast.load(Operand::q, t, 0, 0, 3, 2, tile, 0, 2);
  EXPECT_EQ(std::vector<float>(tile.data(), tile.data() + 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

// read_tile counts what load counts; it reads rows in place only where they already lie as the
// buffer would hold them (row stride == the buffer's leading dimension, unit column stride, the
// same type), and otherwise copies them into the buffer exactly as load does.
TEST(FastMemory, ReadTileCountsLikeLoadAndReadsInPlaceOnlyWhereTheLayoutMatches) {
  std::vector<float> slow(4 * 5);
  std::iota(slow.begin(), slow.end(), 0.0f);  // 4 x 5, element (r, c) = 5 r + c
  Ledger ledger;
  FastMemory fast(40, &ledger, "test");
  auto tile = fast.allocate<float>(15, "tile");
  const auto rows = SlowMatrix<const float>::dense(slow.data(), 4, 5);
  // Rows 1..2, all 5 columns, leading dimension 5: in place.
  const float* in_place = fast.read_tile(Operand::k, rows, 1, 0, 2, 5, tile, 0, 5);
  EXPECT_EQ(in_place, slow.data() + 5);
  EXPECT_EQ(ledger.traffic(Operand::k, WordKind::value).reads, 10);
  // Columns 2..4 of rows 1..2 at leading dimension 5: still in place (the kernel reads 3 per row).
  EXPECT_EQ(fast.read_tile(Operand::k, rows, 1, 2, 2, 3, tile, 0, 5), slow.data() + 7);
  // Leading dimension 3 != row stride 5: copied, as load() copies.
  tile[0] = -1.0f;
  const float* copied = fast.read_tile(Operand::v, rows, 1, 2, 2, 3, tile, 0, 3);
  EXPECT_EQ(copied, tile.data());
  EXPECT_EQ(std::vector<float>(copied, copied + 6), (std::vector<float>{7, 8, 9, 12, 13, 14}));
  // A transposed view (column stride 5): copied.
  const float* columns = fast.read_tile(Operand::q, rows.transposed(), 0, 1, 3, 2, tile, 4, 2);
  EXPECT_EQ(columns, tile.data() + 4);
  EXPECT_EQ(std::vector<float>(columns, columns + 6), (std::vector<float>{5, 10, 6, 11, 7, 12}));  // (r, c) = 5 c + r
  // Another element type (double to float): copied with the conversion.
  const std::vector<double> wide = {0.5, 1.5, 2.5, 3.5};
  const float* converted = fast.read_tile(Operand::lse, SlowMatrix<const double>::dense(wide.data(), 4, 1), 1, 0,
                                          3, 1, tile, 0, 1);
  EXPECT_EQ(converted, tile.data());
  EXPECT_EQ(std::vector<float>(converted, converted + 3), (std::vector<float>{1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(ledger.reads(), 10 + 6 + 6 + 6 + 3);
  EXPECT_EQ(ledger.traffic(Operand::lse, WordKind::value).reads, 3);
}

TEST(FastMemory, ResidencyIsTrackedAndReleased) {
  Ledger ledger;
  FastMemory fast(10, &ledger, "test");
  {
    auto a = fast.allocate<float>(6, "a");
    auto b = fast.allocate<int32_t>(4, "b");
    EXPECT_EQ(fast.resident(), 10);
  }
  EXPECT_EQ(fast.resident(), 0);
  auto c = fast.allocate<double>(10, "c");
  EXPECT_EQ(ledger.peak_resident(), 10);
}

// Every buffer begins on a 64-byte line (so a tile of w fp32 words spans ceil(w / 16) lines of a
// real cache) and reads as zeros when fresh, whatever its type, its size and the buffers before it.
TEST(FastMemory, BuffersStartOnALineAndReadAsZeros) {
  FastMemory fast(1 << 12, nullptr, "test");
  std::vector<FastBuffer<float>> floats;
  for (int64_t words : {1, 3, 7, 16, 17, 97, 257}) {
    floats.push_back(fast.allocate<float>(words, "floats"));
    auto indices = fast.allocate<int64_t>(words, "indices");
    for (const void* data : {static_cast<const void*>(floats.back().data()), static_cast<const void*>(indices.data())}) {
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(data) % kFastBufferAlignment, 0u) << words << " words";
    }
    EXPECT_TRUE(std::all_of(floats.back().data(), floats.back().data() + words, [](float x) { return x == 0.0f; }));
    EXPECT_TRUE(std::all_of(indices.data(), indices.data() + words, [](int64_t x) { return x == 0; }));
    std::fill(floats.back().data(), floats.back().data() + words, 1.0f);  // the next ones must not see it
  }
  EXPECT_EQ(kFastBufferAlignment, 64u);
}

TEST(FastMemory, ExceedingCapacityNamesTheScheduleTheBufferAndTheSizes) {
  FastMemory fast(100, nullptr, "flash forward");
  auto a = fast.allocate<float>(60, "Q tile");
  try {
    auto b = fast.allocate<float>(50, "K tile");
    FAIL() << "expected an error";
  } catch (const spattn::RuntimeError& error) {
    EXPECT_STREQ(error.what(),
                 "flash forward: allocating K tile (50 words) with 60 words resident would hold "
                 "110 words in fast memory, more than M = 100");
  }
  EXPECT_EQ(fast.resident(), 60);
}

TEST(FastMemory, NonPositiveCapacityIsRejected) {
  EXPECT_THROW(FastMemory(0, nullptr, "x"), spattn::InvalidArgument);
}

TEST(Ledger, SumsPerOperandAndKeepsTheLargerPeak) {
  Ledger a, b;
  a.add_read(Operand::q, WordKind::value, 5);
  a.add_read(Operand::mask, WordKind::index, 3);
  a.note_resident(7);
  b.add_write(Operand::o, WordKind::value, 4);
  b.note_resident(9);
  a += b;
  EXPECT_EQ(a.reads(), 8);
  EXPECT_EQ(a.writes(), 4);
  EXPECT_EQ(a.total(WordKind::index).reads, 3);
  EXPECT_EQ(a.peak_resident(), 9);
  EXPECT_NE(a.report().find("mask     index"), std::string::npos) << a.report();
}

// ---- The line model (io.hpp: "Lines") ----------------------------------------------------------

// segment_lines and chunked_lines against counting the distinct lines word by word.
TEST(LineModel, RunsAndChunkedRowsCountTheirDistinctLines) {
  EXPECT_EQ(segment_lines(0, 0, 16), 0);
  EXPECT_EQ(segment_lines(0, 16, 16), 1);
  EXPECT_EQ(segment_lines(15, 2, 16), 2);
  EXPECT_EQ(segment_lines(3, 1, 1), 1);
  for (int64_t line = 1; line <= 17; line += 4) {
    for (int64_t total = 0; total <= 70; ++total) {
      for (int64_t chunk = 1; chunk <= 40; chunk += 3) {
        int64_t expected = 0;
        for (int64_t start = 0; start < total; start += chunk) {
          const int64_t end = std::min(total, start + chunk);
          int64_t last_line = -1;
          for (int64_t w = start; w < end; ++w) {
            if (w / line != last_line) ++expected;
            last_line = w / line;
          }
        }
        ASSERT_EQ(chunked_lines(total, chunk, line), expected)
            << "total " << total << " chunk " << chunk << " L " << line;
      }
    }
  }
}

// The rule on a 5 x 20 row-major array with L = 8: a tile costs, per row, the lines its columns
// span; its transposed view costs the same; a vector is one run; a view with no unit stride costs
// a line per word. grid_lines is the sum over a grid of tiles.
TEST(LineModel, TileLinesFollowTheStatedRule) {
  std::vector<float> slow(5 * 20);
  const auto matrix = SlowMatrix<const float>::dense(slow.data(), 5, 20);
  EXPECT_EQ(matrix.tile_lines(1, 6, 3, 4, 8), 3 * 2);              // columns 6..9: lines 0, 1
  EXPECT_EQ(matrix.transposed().tile_lines(6, 1, 4, 3, 8), 3 * 2);  // the same words
  EXPECT_EQ(matrix.tile_lines(0, 0, 5, 20, 8), 5 * 3);
  const auto vector = SlowMatrix<const float>::dense(slow.data(), 100, 1);
  EXPECT_EQ(vector.tile_lines(6, 0, 4, 1, 8), 2);
  EXPECT_EQ(vector.transposed().tile_lines(0, 6, 1, 4, 8), 2);
  const SlowMatrix<const float> strided(slow.data(), 5, 5, 20, 4);  // every 4th column
  EXPECT_EQ(strided.tile_lines(0, 0, 2, 3, 8), 6);
  EXPECT_EQ(matrix.tile_lines(0, 0, 0, 4, 8), 0);
  for (const int64_t tile_rows : {1, 2, 5}) {
    for (const int64_t tile_cols : {1, 3, 8, 20}) {
      for (const auto& view : {matrix, matrix.transposed(), vector, vector.transposed()}) {
        int64_t sum = 0;
        for (int64_t r = 0; r < view.rows(); r += tile_rows) {
          for (int64_t c = 0; c < view.cols(); c += tile_cols) {
            sum += view.tile_lines(r, c, std::min(tile_rows, view.rows() - r),
                                   std::min(tile_cols, view.cols() - c), 8);
          }
        }
        const bool transposed = view.rows() != 5 && view.rows() != 100;
        const int64_t row_stride = transposed ? 1 : view.cols();
        const int64_t col_stride = transposed ? view.rows() : 1;
        EXPECT_EQ(grid_lines(row_stride, col_stride, view.rows(), view.cols(), tile_rows, tile_cols, 8), sum)
            << view.rows() << " x " << view.cols() << " tiles " << tile_rows << " x " << tile_cols;
      }
    }
  }
}

// FastMemory books the lines of every move beside its words, in the ledger's line size; the one-
// word moves cost a line each; a CSR tile costs its row pointers' run and, per row, the runs of
// column indices and values it read.
TEST(LineModel, FastMemoryCountsTheLinesOfEveryMove) {
  std::vector<float> slow(6 * 32, 1.0f);
  const auto matrix = SlowMatrix<float>::dense(slow.data(), 6, 32);
  Ledger ledger(16);
  FastMemory fast(1000, &ledger, "test");
  auto tile = fast.allocate<float>(6 * 32, "tile");
  fast.load(Operand::q, SlowMatrix<const float>::dense(slow.data(), 6, 32), 0, 8, 6, 16, tile, 0, 16);
  EXPECT_EQ(ledger.lines(Operand::q, WordKind::value).reads, 6 * 2);  // columns 8..23
  fast.store(Operand::o, tile, 0, 16, matrix, 2, 16, 3, 16);
  EXPECT_EQ(ledger.lines(Operand::o, WordKind::value).writes, 3);
  fast.load_word(Operand::mask, SlowMatrix<const float>::dense(slow.data(), 6, 32), 1, 1, tile, 0,
                 WordKind::index);
  EXPECT_EQ(ledger.lines(Operand::mask, WordKind::index).reads, 1);
  EXPECT_EQ(ledger.total_lines().total(), 12 + 3 + 1);

  // CSR: a 3 x 40 matrix, rows holding columns {0..19}, {}, {5, 30}; the tile is columns [0, 40).
  const std::vector<int64_t> row_ptr = {0, 20, 20, 22};
  std::vector<int64_t> col_idx(20);
  std::iota(col_idx.begin(), col_idx.end(), 0);
  col_idx.push_back(5);
  col_idx.push_back(30);
  const std::vector<float> values(22, 2.0f);
  const sparse_formats::CsrMatrixView<int64_t, float> csr{{3, 40, row_ptr.data(), col_idx.data()}, values.data()};
  Ledger csr_ledger(16);
  FastMemory csr_fast(200, &csr_ledger, "test");
  auto dense = csr_fast.allocate<float>(3 * 40, "dense");
  csr_fast.load(Operand::k, SlowMatrix<const float>::csr(csr), 0, 0, 3, 40, dense, 0, 40);
  // Row pointers [0, 4): 1 line; row 0 indices and values [0, 20): 2 lines each; row 2 [20, 22):
  // 1 line each.
  EXPECT_EQ(csr_ledger.lines(Operand::k, WordKind::index).reads, 1 + 2 + 1);
  EXPECT_EQ(csr_ledger.lines(Operand::k, WordKind::value).reads, 2 + 1);
}

TEST(LineModel, BadLineSizesAndMixedLedgersAreRefused) {
  EXPECT_THROW(Ledger(0), spattn::InvalidArgument);
  Ledger a(16), b(8);
  EXPECT_THROW(a += b, spattn::InvalidArgument);
  a.add_read_lines(Operand::q, WordKind::value, 3);
  a.add_read(Operand::q, WordKind::value, 40);
  EXPECT_NE(a.report().find("3 lines of 16 words"), std::string::npos);
}
