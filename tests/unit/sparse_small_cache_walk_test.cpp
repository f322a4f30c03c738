// The density-adaptive schedule's walk (src/schedules/sparse_small_cache/sparse_small_cache_walk.hpp): its two
// orders, the block scan and the row queue, must visit the same windows, touch the same columns
// and give every row its entries in column order, moving the same words; the schedule's results
// and counts rest on that whichever order a block takes.
#include "schedules/sparse_small_cache/sparse_small_cache_walk.hpp"

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace {

using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::schedules::SlowMatrix;
using spattn::schedules::sparse_small_cache_detail::BlockWalker;
using spattn::schedules::sparse_small_cache_detail::WalkStructure;
using Order = BlockWalker::Order;

// A CSR pattern's index arrays as int64 column vectors (the walk's structure).
struct Structure {
  std::vector<int64_t> ptr, idx;
  WalkStructure view;
  template <typename Index>
  explicit Structure(const sparse_formats::CsrPattern<Index>& pattern)
      : ptr(pattern.row_ptr.begin(), pattern.row_ptr.end()), idx(pattern.col_idx.begin(), pattern.col_idx.end()) {
    view.num_rows = pattern.num_rows;
    view.num_cols = pattern.num_cols;
    view.ptr = SlowMatrix<const int64_t>::dense(ptr.data(), static_cast<int64_t>(ptr.size()), 1);
    view.idx = SlowMatrix<const int64_t>::dense(idx.data(), static_cast<int64_t>(idx.size()), 1);
  }
};

struct Visit {
  std::vector<std::pair<int64_t, int64_t>> touches;             // (column, slot), in order
  std::vector<std::tuple<int64_t, int64_t, int64_t>> sequence;  // (touches so far, row, position)
  int64_t index_reads = 0;
  int64_t index_lines = 0;  // of 16 words
  std::vector<std::tuple<int64_t, int64_t, int64_t>> runs;  // (row, begin, end) as the runs ended
};

// Records every run's end, and checks each begins before its first entry and ends after its last.
struct RecordRuns {
  Visit& visit;
  int64_t row0;
  void begin_run(int64_t /*r*/, int64_t begin, int64_t end) { EXPECT_LT(begin, end); }
  void end_run(int64_t r, int64_t begin, int64_t end) { visit.runs.emplace_back(row0 + r, begin, end); }
};

// Walks every row block of `structure` in `order`; block_rows rows, block_cols-wide windows.
Visit walk_all(const Structure& structure, int64_t block_rows, int64_t block_cols, Order order, int64_t run = 1) {
  Ledger ledger;
  FastMemory fast(1 << 20, &ledger, "walk test");
  BlockWalker walker(fast, structure.view, block_rows, block_cols, run);
  Visit visit;
  const int64_t num_rows = structure.view.num_rows;
  for (int64_t row0 = 0; row0 < num_rows; row0 += block_rows) {
    walker.load_block(fast, row0, std::min(block_rows, num_rows - row0));
    std::map<int64_t, int64_t> slots;  // slot -> column, in the current window
    walker.walk(
        fast,
        [&](int64_t col, int64_t slot) {
          visit.touches.emplace_back(col, slot);
          slots[slot] = col;
        },
        [&](int64_t r, int64_t slot, int64_t position) {
          // The entry's column is the one touched at its slot.
          EXPECT_EQ(slots.count(slot), 1u);
          if (slots.count(slot) == 1) {
            EXPECT_EQ(slots[slot], structure.idx[static_cast<size_t>(position)]);
          }
          visit.sequence.emplace_back(static_cast<int64_t>(visit.touches.size()), row0 + r, position);
        },
        RecordRuns{visit, row0}, order);
  }
  visit.index_reads = ledger.traffic(spattn::io::Operand::mask, spattn::io::WordKind::index).reads;
  visit.index_lines = ledger.lines(spattn::io::Operand::mask, spattn::io::WordKind::index).reads;
  return visit;
}

// Each row's positions in visiting order.
std::map<int64_t, std::vector<int64_t>> per_row(const Visit& visit) {
  std::map<int64_t, std::vector<int64_t>> rows;
  for (const auto& [touched, row, position] : visit.sequence) rows[row].push_back(position);
  return rows;
}

// The (column, slot) touches, sorted (the two orders may touch a window's columns in another order).
std::vector<std::pair<int64_t, int64_t>> sorted_touches(const Visit& visit) {
  auto all = visit.touches;
  std::sort(all.begin(), all.end());
  return all;
}

TEST(SparseSmallCacheWalk, HandCheckedWindowsOfTwoColumns) {
  // 3 x 6, block of 3 rows, windows of 2 columns:
  //   row 0: cols 1, 4     row 1: cols 0, 1, 5     row 2: col 4
  // windows start at the smallest next column: [0, 2), then [4, 6) (2 and 3 are empty).
  sparse_formats::CsrPattern<int32_t> pattern = sparse_formats::CsrPattern<int32_t>::empty(3, 6);
  pattern.row_ptr = {0, 2, 5, 6};
  pattern.col_idx = {1, 4, 0, 1, 5, 4};
  const Structure structure(pattern);
  for (Order order : {Order::scan, Order::queue}) {
    const Visit visit = walk_all(structure, 3, 2, order);
    // Each row's entries in column order; every position once.
    const auto rows = per_row(visit);
    EXPECT_EQ(rows.at(0), (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(rows.at(1), (std::vector<int64_t>{2, 3, 4}));
    EXPECT_EQ(rows.at(2), (std::vector<int64_t>{5}));
    // Columns 0, 1 in the first window (slots 0, 1), 4, 5 in the second (slots 0, 1).
    EXPECT_EQ(sorted_touches(visit), (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 1}, {4, 0}, {5, 1}}));
    // Row pointers 4 + every column word once (6) + nothing else.
    EXPECT_EQ(visit.index_reads, 4 + 6);
  }
  // The scan takes a window's rows in row order: row 0's entry at column 1 before row 1's.
  const Visit scan = walk_all(structure, 3, 2, Order::scan);
  EXPECT_EQ(std::get<2>(scan.sequence[0]), 0);
  EXPECT_EQ(std::get<2>(scan.sequence[1]), 2);
  EXPECT_EQ(std::get<2>(scan.sequence[2]), 3);
  // The queue in (next column, row) order: row 1's column 0 first.
  const Visit queue = walk_all(structure, 3, 2, Order::queue);
  EXPECT_EQ(std::get<2>(queue.sequence[0]), 2);
}

// Runs change what moves together, never what is visited: the same entries in the same order and
// the same index words, in fewer lines; every run is a piece of one row cut at multiples of `run`
// positions, and the runs of a row cover its positions once, in order.
TEST(SparseSmallCacheWalk, RunsVisitTheSameEntriesInFewerLines) {
  for (double density : {0.03, 0.2, 0.9}) {
    for (int64_t n : {1, 7, 97, 257}) {
      const auto pattern = sparse_formats::random_pattern(n, n + 3, density, 11);
      const Structure structure(pattern);
      for (int64_t block_rows : {1, 5, 64}) {
        const Visit words = walk_all(structure, block_rows, 1, Order::automatic, 1);
        for (int64_t run : {2, 8, 16}) {
          SCOPED_TRACE(testing::Message() << "density " << density << " n " << n << " rows " << block_rows << " run "
                                          << run);
          const Visit runs = walk_all(structure, block_rows, 1, Order::automatic, run);
          EXPECT_EQ(runs.sequence, words.sequence);
          EXPECT_EQ(runs.index_reads, words.index_reads);
          // Index words move in runs of run / 2 (8-byte words): run 2 moves them one at a time.
          if (run == 2) {
            EXPECT_EQ(runs.index_lines, words.index_lines);
          } else if (pattern.nnz() > 2 * n) {
            EXPECT_LT(runs.index_lines, words.index_lines);
          }
          std::map<int64_t, int64_t> next;  // row -> the position its next run must begin at
          for (const auto& [row, begin, end] : runs.runs) {
            const int64_t row_begin = pattern.row_ptr[static_cast<size_t>(row)];
            const int64_t row_end = pattern.row_ptr[static_cast<size_t>(row) + 1];
            EXPECT_EQ(begin, next.count(row) ? next[row] : row_begin);
            EXPECT_TRUE(begin == row_begin || begin % run == 0);
            EXPECT_TRUE(end == row_end || end % run == 0);
            EXPECT_LE(end - begin, run);
            next[row] = end;
          }
          for (int64_t row = 0; row < n; ++row) {
            const int64_t row_end = pattern.row_ptr[static_cast<size_t>(row) + 1];
            if (row_end > pattern.row_ptr[static_cast<size_t>(row)]) {
              EXPECT_EQ(next[row], row_end);
            }
          }
        }
      }
    }
  }
}

TEST(SparseSmallCacheWalk, ScanAndQueueVisitAlikeOnRandomMasks) {
  for (double density : {0.002, 0.03, 0.2, 0.9}) {
    for (int64_t n : {1, 7, 97, 257}) {
      const auto pattern = sparse_formats::random_pattern(n, n + 3, density, 7);
      const Structure structure(pattern);
      for (int64_t block_rows : {1, 5, 64, 300}) {
        for (int64_t block_cols : {1, 3, 40}) {
          SCOPED_TRACE(testing::Message() << "density " << density << " n " << n << " rows " << block_rows
                                          << " cols " << block_cols);
          const Visit scan = walk_all(structure, block_rows, block_cols, Order::scan);
          const Visit queue = walk_all(structure, block_rows, block_cols, Order::queue);
          const Visit automatic = walk_all(structure, block_rows, block_cols, Order::automatic);
          EXPECT_EQ(per_row(scan), per_row(queue));
          EXPECT_EQ(sorted_touches(scan), sorted_touches(queue));
          EXPECT_EQ(scan.index_reads, queue.index_reads);
          EXPECT_EQ(static_cast<int64_t>(scan.sequence.size()), pattern.nnz());
          EXPECT_EQ(per_row(automatic), per_row(scan));
          // One-column windows: the same sequence, entry for entry.
          if (block_cols == 1) {
            EXPECT_EQ(scan.sequence, queue.sequence);
          }
          // Each row's positions are its CSR range in order (column order).
          for (const auto& [row, positions] : per_row(scan)) {
            for (size_t i = 0; i < positions.size(); ++i) {
              EXPECT_EQ(positions[i], static_cast<int64_t>(pattern.row_ptr[static_cast<size_t>(row)]) + static_cast<int64_t>(i));
            }
          }
        }
      }
    }
  }
}

}  // namespace
