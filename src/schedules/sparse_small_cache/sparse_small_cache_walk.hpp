// Private to the sparse small-cache schedule: the walk over one row block's entries that every
// sweep shares (sparse_small_cache.hpp; docs/sparse_small_cache.md, "The sweep").
//
// Resident index state of a block of `rows` rows (all words counted by FastMemory):
//   bounds  (rows + 1)  the block's row pointers, loaded once per block
//   cursor  (rows)      each row's next unread entry
//   next    (rows)      the column (row, when transposed) of that entry, already loaded: the word
//                       that ends a row's run in one window opens its run in the next, so every
//                       index word is loaded exactly once per walk
//   queue   (rows)      the rows with entries left, a binary min-heap on (next column, row), for
//                       sparse blocks (Order below)
//   marker  (block_cols) per window column, the window that last loaded its B row
//   index runs (rows x index_run(run), run > 1 only)  each row's current run of column indices
//   positions (transposed only: rows x index_run(run), or 1 when run = 1)  the CSR positions of
//                       the current run
// Entries move in runs (SparseSweepTiles::run): a row's entry values are cut at multiples of `run`
// positions and its 8-byte index words at multiples of index_run(run) = run / 2, and each run moves
// as one vector. With run = L, a line of L 4-byte words, a run is the part of a row inside one
// line: it costs one line where word-at-a-time moves cost a line per entry. With run = 1 every
// word moves alone (next holds it).
// A walk visits the block's entries in column order, one window of block_cols columns at a time
// (starting at the smallest next column, so empty stretches are skipped), each window row by row
// (each row's entries in the window, then the next row's).
// How a window finds its rows (a scan of the block or the queue) changes the speed only.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/io.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>

namespace spattn::schedules::sparse_small_cache_detail {

// The structure a sweep walks: CSR (rows = queries) or the transpose (rows = keys, with the CSR
// position of each entry). Index arrays as slow-memory column vectors.
struct WalkStructure {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  SlowMatrix<const int64_t> ptr;       // (num_rows + 1, 1)
  SlowMatrix<const int64_t> idx;       // (nnz, 1)
  SlowMatrix<const int64_t> position;  // (nnz, 1) when transposed; empty otherwise
  bool transposed = false;
};

// The walk's cost estimates, in rows checked or heap word steps: BlockWalker picks each block's
// order with them, and PlanObjective::time prices the walks with them
// (estimate_sparse_small_cache_work). A scan checks every row of the block per window; the
// queue does about kQueueCost word accesses per heap level for each row visit (a row's entries
// in one window) and each row. kQueueCost = 2 since the branch-free heap and the grouped scan:
// against 8, 1.5x to 1.9x faster on uniform random masks of density 0.02 (n 4096), within the
// spread on windows, BigBird, causal and random blocks; 1 was faster still on random masks but
// 1.6x slower on the window (docs/sparse_small_cache.md section 8).
inline constexpr int64_t kQueueCost = 2;
inline int64_t heap_levels(int64_t rows) {
  int64_t levels = 1;
  while ((int64_t{1} << levels) <= rows) ++levels;
  return levels;
}
inline int64_t scan_steps(int64_t rows, int64_t windows) { return rows * windows; }
inline int64_t queue_steps(int64_t rows, int64_t row_visits) {
  return kQueueCost * (row_visits + rows) * heap_levels(rows);
}

class BlockWalker {
 public:
  BlockWalker(io::FastMemory& fast, const WalkStructure& structure, int64_t block_rows,
              int64_t block_cols, int64_t run = 1)
      : s_(structure),
        block_cols_(block_cols),
        run_(run),
        index_run_(index_run(run)),
        run_mask_(run - 1),
        index_mask_(index_run_ - 1),
        state_(fast.allocate<int64_t>(4 * block_rows + 1 + block_cols,
                                      "sparse_small_cache row pointers, cursors, next columns, queue and markers")),
        bounds_(state_.data()),
        cursor_(bounds_ + block_rows + 1),
        next_(cursor_ + block_rows),
        queue_(next_ + block_rows),
        marker_(queue_ + block_rows),
        index_runs_(fast.allocate<int64_t>(run > 1 ? block_rows * index_run(run) : 0, "sparse_small_cache index runs")),
        // (an index run per row whenever run > 1, though with run = 2 it is one word long)
        positions_(fast.allocate<int64_t>(structure.transposed ? (run > 1 ? block_rows * index_run(run) : 1) : 0,
                                          "sparse_small_cache entry positions")) {}

  // Words of a buffer holding one run per row of the block: a run of one word is used as soon as
  // it is moved, so one word serves every row.
  static int64_t run_buffer_words(int64_t block_rows, int64_t run) { return run > 1 ? block_rows * run : 1; }
  // Where entry `position` of row r sits in a buffer of value runs (kRuns: run > 1, a compile-time
  // choice of the sweeps, so that the one-word path stays plain), and of index runs (run > 1).
  template <bool kRuns>
  int64_t run_slot(int64_t r, int64_t position) const {
    if constexpr (kRuns) return r * run_ + (position & run_mask_);
    return 0;
  }
  int64_t index_slot(int64_t r, int64_t position) const { return r * index_run_ + (position & index_mask_); }
  bool runs() const { return run_ > 1; }

  // Loads the row pointers of rows [row0, row0 + rows): rows + 1 index words.
  void load_block(io::FastMemory& fast, int64_t row0, int64_t rows) {
    row0_ = row0;
    rows_ = rows;
    fast.load(io::Operand::mask, s_.ptr, row0, 0, rows + 1, 1, state_, bounds_ - state_.data(), 1,
              io::WordKind::index);
  }
  int64_t row0() const { return row0_; }
  int64_t rows() const { return rows_; }
  bool nonempty(int64_t r) const { return bounds_[r] < bounds_[r + 1]; }
  int64_t block_nnz() const { return bounds_[rows_] - bounds_[0]; }

  // How a walk finds each window's rows. Both visit the same windows and, in each, every row's
  // entries in column order, so they move the same words and compute the same bits (every hook
  // works per row); a window's rows come in row order (scan) or in (next column, row) order
  // (queue: the same when the window is one column wide, the usual tile). They differ in speed.
  // scan: every row of the block per window, O(rows x windows), sequential (fast when most rows
  // have an entry in most windows). queue: the rows with entries left in a min-heap on (next
  // column, row), O((rows + entries) log rows) random accesses (fast on sparse blocks, where the
  // scan was about n^2 per chunk on a uniform random mask).
  enum class Order { automatic, scan, queue };

  // One walk over the block's entries. touch(col, slot) the first time a window touches a column
  // (slot = col - window start < block_cols); entry(r, slot, position) for each entry, r the row
  // in the block, position its index in the CSR value arrays. runs.begin_run(r, begin, end) before
  // the first entry of each run of row r's walked positions [begin, end), runs.end_run(r, begin,
  // end) after its last (the sweeps move their entry values there).
  template <typename Touch, typename Entry, typename Runs>
  void walk(io::FastMemory& fast, Touch&& touch, Entry&& entry, Runs&& runs, Order order = Order::automatic) {
    if (this->runs()) {
      walk_with<true>(fast, touch, entry, runs, order);
    } else {
      walk_with<false>(fast, touch, entry, runs, order);
    }
  }
  struct NoRunHooks {
    void begin_run(int64_t /*r*/, int64_t /*begin*/, int64_t /*end*/) {}
    void end_run(int64_t /*r*/, int64_t /*begin*/, int64_t /*end*/) {}
  };
  template <typename Touch, typename Entry>
  void walk(io::FastMemory& fast, Touch&& touch, Entry&& entry, Order order = Order::automatic) {
    walk(fast, touch, entry, NoRunHooks{}, order);
  }
  // The same with runs() known at compile time (kRuns == runs(), asserted): the sweeps' path.
  template <bool kRuns, typename Touch, typename Entry, typename Runs>
  void walk_with(io::FastMemory& fast, Touch&& touch, Entry&& entry, Runs&& runs, Order order = Order::automatic) {
    assert(kRuns == (run_ > 1));
    if (rows_ == 0) return;
    for (int64_t r = 0; r < rows_; ++r) {
      cursor_[r] = bounds_[r];
      peek<kRuns>(fast, r);
    }
    if (order == Order::automatic) order = preferred_order();
    if (!queue_fits()) order = Order::scan;
    if (order == Order::scan) {
      scan_walk<kRuns>(fast, touch, entry, runs);
    } else {
      queue_walk<kRuns>(fast, touch, entry, runs);
    }
  }

 private:
  // The cheaper order for this block, from the cost estimates above: at most min(entries,
  // columns / block_cols) windows (each holds an entry; the next starts past its end), at most
  // min(entries, rows x windows) row visits.
  Order preferred_order() const {
    const int64_t entries = block_nnz();
    const int64_t windows = std::min(entries, (s_.num_cols + block_cols_ - 1) / block_cols_);
    const int64_t row_visits = std::min(entries, rows_ * windows);
    return queue_steps(rows_, row_visits) < scan_steps(rows_, windows) ? Order::queue : Order::scan;
  }

  // Row r's entries in [window_begin, window_end), in column order.
  template <bool kRuns, typename Touch, typename Entry, typename Runs>
  void visit_row(io::FastMemory& fast, int64_t r, int64_t window_begin, int64_t window_end, Touch& touch,
                 Entry& entry, Runs& runs) {
    while (next_[r] < window_end) {
      const int64_t slot = next_[r] - window_begin;
      if (marker_[slot] != window_) {
        marker_[slot] = window_;
        touch(next_[r], slot);
      }
      const int64_t at = cursor_[r];
      if constexpr (kRuns) {
        visit_in_runs(fast, r, slot, at, entry, runs);
      } else {  // every word alone: each entry is a run
        int64_t position = at;
        if (s_.transposed) {
          fast.load_word(io::Operand::mask, s_.position, at, 0, positions_, 0, io::WordKind::index);
          position = positions_[0];
        }
        runs.begin_run(r, at, at + 1);
        entry(r, slot, position);
        runs.end_run(r, at, at + 1);
      }
      ++cursor_[r];
      peek<kRuns>(fast, r);
    }
  }

  // An entry of row r with runs of run_ > 1 values: the run of positions (transposed) loaded at
  // its start, the value run begun before its first entry and ended after its last.
  template <typename Entry, typename Runs>
  void visit_in_runs(io::FastMemory& fast, int64_t r, int64_t slot, int64_t at, Entry& entry, Runs& runs) {
    const int64_t row_end = bounds_[r + 1];
    if (s_.transposed) load_index_run(fast, s_.position, positions_, r, at);
    // The value run holding `at`: [max(row start, at rounded down), min(row end, that + run)).
    const int64_t aligned = at & ~run_mask_;
    if (at == bounds_[r] || at == aligned) runs.begin_run(r, at, std::min(row_end, aligned + run_));
    entry(r, slot, s_.transposed ? positions_[index_slot(r, at)] : at);
    if (at + 1 == row_end || ((at + 1) & run_mask_) == 0) runs.end_run(r, std::max(bounds_[r], aligned), at + 1);
  }

  // Every row per window; the next window starts at the smallest next column, found on the way.
  // Rows are checked kScanGroup at a time: a branch-free minimum over the group's next columns
  // (the common case on a sparse block: no row of the group is in the window, and the minimum is
  // all the scan needs), and row by row only where one is (perf: the per-row compare and minimum
  // was most of a density-0.02 sweep with one-column windows; whole runs 1.0x to 1.3x faster).
  static constexpr int64_t kScanGroup = 16;
  template <bool kRuns, typename Touch, typename Entry, typename Runs>
  void scan_walk(io::FastMemory& fast, Touch& touch, Entry& entry, Runs& runs) {
    const int64_t* next = next_;
    int64_t window_begin = *std::min_element(next, next + rows_);
    while (window_begin < s_.num_cols) {
      const int64_t window_end = std::min(window_begin + block_cols_, s_.num_cols);
      ++window_;
      int64_t following = s_.num_cols;
      for (int64_t r0 = 0; r0 < rows_; r0 += kScanGroup) {
        const int64_t r1 = std::min(r0 + kScanGroup, rows_);
        int64_t group_min = s_.num_cols;
        for (int64_t r = r0; r < r1; ++r) group_min = std::min(group_min, next[r]);
        if (group_min >= window_end) {
          following = std::min(following, group_min);
          continue;
        }
        for (int64_t r = r0; r < r1; ++r) {
          visit_row<kRuns>(fast, r, window_begin, window_end, touch, entry, runs);
          following = std::min(following, next[r]);
        }
      }
      window_begin = following;
    }
  }

  // The rows with entries left in a heap on (next column, row), each held as one key word
  // (next column << 32 | row: one integer compare orders them); the window's rows come off its
  // top in that order (row order when a window is one column wide, the usual tile) and go back
  // further down, or out once they have no entries left.
  template <bool kRuns, typename Touch, typename Entry, typename Runs>
  void queue_walk(io::FastMemory& fast, Touch& touch, Entry& entry, Runs& runs) {
    queued_ = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      if (next_[r] < s_.num_cols) push(queue_key(r));
    }
    while (queued_ > 0) {
      const int64_t window_begin = queue_[0] >> 32;
      const int64_t window_end = std::min(window_begin + block_cols_, s_.num_cols);
      ++window_;
      while (queued_ > 0 && (queue_[0] >> 32) < window_end) {
        const int64_t r = queue_[0] & 0xffffffff;
        visit_row<kRuns>(fast, r, window_begin, window_end, touch, entry, runs);
        sift_down(next_[r] < s_.num_cols ? queue_key(r) : queue_[--queued_]);
      }
    }
  }

  int64_t queue_key(int64_t r) const { return next_[r] << 32 | r; }
  // The queue's keys fit in a word: columns below 2^31, rows below 2^32 (else the walk scans).
  bool queue_fits() const { return s_.num_cols < (int64_t{1} << 31) && rows_ < (int64_t{1} << 32); }

  // next_[r] = the column of row r's entry at its cursor, or num_cols past its end. With runs of
  // one word it is loaded alone; else the row's run that starts at the cursor is loaded whole.
  template <bool kRuns>
  void peek(io::FastMemory& fast, int64_t r) {
    const int64_t at = cursor_[r];
    if (at >= bounds_[r + 1]) {
      next_[r] = s_.num_cols;
    } else if constexpr (!kRuns) {
      fast.load_word(io::Operand::mask, s_.idx, at, 0, state_, next_ - state_.data() + r, io::WordKind::index);
    } else {
      load_index_run(fast, s_.idx, index_runs_, r, at);
      next_[r] = index_runs_[index_slot(r, at)];
    }
  }

  // With runs: the index run of `from` (row r's part of an index array) that starts at `at`, loaded
  // whole into `buffer` when one starts there (the row's first entry, or a multiple of index_run_).
  void load_index_run(io::FastMemory& fast, const SlowMatrix<const int64_t>& from, io::FastBuffer<int64_t>& buffer,
                      int64_t r, int64_t at) {
    if (at != bounds_[r] && (at & index_mask_) != 0) return;
    const int64_t end = std::min(bounds_[r + 1], (at & ~index_mask_) + index_run_);
    fast.load_run(io::Operand::mask, from, at, end - at, buffer, index_slot(r, at), io::WordKind::index);
  }

  void push(int64_t key) {
    int64_t i = queued_++;
    while (i > 0) {
      const int64_t parent = (i - 1) / 2;
      if (queue_[parent] <= key) break;
      queue_[i] = queue_[parent];
      i = parent;
    }
    queue_[i] = key;
  }

  // Puts key in place of the top one (the heap keeps queued_ keys).
  void sift_down(int64_t key) {
    int64_t i = 0;
    while (true) {
      int64_t child = 2 * i + 1;
      if (child >= queued_) break;
      if (child + 1 < queued_) child += queue_[child + 1] < queue_[child] ? 1 : 0;  // (branch-free)
      if (key <= queue_[child]) break;
      queue_[i] = queue_[child];
      i = child;
    }
    if (queued_ > 0) queue_[i] = key;
  }

  WalkStructure s_;
  int64_t block_cols_;
  int64_t run_;        // entry values per run (a power of two)
  int64_t index_run_;  // index words per run: index_run(run_)
  int64_t run_mask_;   // run_ - 1: positions & ~run_mask_ start runs
  int64_t index_mask_;
  int64_t row0_ = 0;
  int64_t rows_ = 0;
  int64_t window_ = 0;  // windows are numbered from 1; markers start at 0
  // The index state above but the runs, in one buffer: fast buffers start on a line each, and
  // these few words per row are read at every entry, so apart they would hold five lines of a
  // cache that the streamed rows share (docs/io_model.md, "Against a cache simulator").
  io::FastBuffer<int64_t> state_;
  int64_t* bounds_;  // (rows + 1)
  int64_t* cursor_;  // (rows)
  int64_t* next_;    // (rows)
  int64_t* queue_;   // (rows)
  int64_t* marker_;  // (block_cols)
  int64_t queued_ = 0;  // keys in the heap, queue_[0, queued_)
  io::FastBuffer<int64_t> index_runs_;
  io::FastBuffer<int64_t> positions_;
};

}  // namespace spattn::schedules::sparse_small_cache_detail
