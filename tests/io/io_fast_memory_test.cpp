// The fast-memory model: moves are counted exactly, residency is tracked, capacity is enforced.
#include <spattn/io.hpp>

#include <gtest/gtest.h>

#include <numeric>
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
