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
//   position (1)        transposed walks only: the CSR position of the current entry
// A walk visits the block's entries in column order, one window of block_cols columns at a time
// (starting at the smallest next column, so empty stretches are skipped), each window row by row
// (each row's entries in the window, then the next row's).
// How a window finds its rows (a scan of the block or the queue) changes the speed only.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "cpu/kernels/small_cache_kernels.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/io.hpp>

#include <algorithm>
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
              int64_t block_cols)
      : s_(structure),
        block_cols_(block_cols),
        bounds_(fast.allocate<int64_t>(block_rows + 1, "sparse_small_cache row pointers")),
        cursor_(fast.allocate<int64_t>(block_rows, "sparse_small_cache cursors")),
        next_(fast.allocate<int64_t>(block_rows, "sparse_small_cache next columns")),
        queue_(fast.allocate<int64_t>(block_rows, "sparse_small_cache row queue")),
        marker_(fast.allocate<int64_t>(block_cols, "sparse_small_cache window markers")),
        position_(fast.allocate<int64_t>(structure.transposed ? 1 : 0,
                                         "sparse_small_cache entry position")) {}

  // Loads the row pointers of rows [row0, row0 + rows): rows + 1 index words.
  void load_block(io::FastMemory& fast, int64_t row0, int64_t rows) {
    row0_ = row0;
    rows_ = rows;
    fast.load(io::Operand::mask, s_.ptr, row0, 0, rows + 1, 1, bounds_, 0, 1, io::WordKind::index);
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
  // in the block, position its index in the CSR value arrays.
  template <typename Touch, typename Entry>
  void walk(io::FastMemory& fast, Touch&& touch, Entry&& entry, Order order = Order::automatic) {
    if (rows_ == 0) return;
    for (int64_t r = 0; r < rows_; ++r) {
      cursor_[r] = bounds_[r];
      peek(fast, r);
    }
    if (order == Order::automatic) order = preferred_order();
    if (!queue_fits()) order = Order::scan;
    if (order == Order::scan) {
      scan_walk(fast, touch, entry);
    } else {
      queue_walk(fast, touch, entry);
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
  template <typename Touch, typename Entry>
  void visit_row(io::FastMemory& fast, int64_t r, int64_t window_begin, int64_t window_end, Touch& touch,
                 Entry& entry) {
    while (next_[r] < window_end) {
      const int64_t slot = next_[r] - window_begin;
      if (marker_[slot] != window_) {
        marker_[slot] = window_;
        touch(next_[r], slot);
      }
      int64_t position = cursor_[r];
      if (s_.transposed) {
        fast.load_word(io::Operand::mask, s_.position, cursor_[r], 0, position_, 0, io::WordKind::index);
        position = position_[0];
      }
      entry(r, slot, position);
      ++cursor_[r];
      peek(fast, r);
    }
  }

  // Every row per window; the next window starts at the smallest next column, found on the way.
  // Rows are checked kScanGroup at a time: a branch-free minimum over the group's next columns
  // (the common case on a sparse block: no row of the group is in the window, and the minimum is
  // all the scan needs), and row by row only where one is (perf: the per-row compare and minimum
  // was most of a density-0.02 sweep with one-column windows; whole runs 1.0x to 1.3x faster).
  static constexpr int64_t kScanGroup = 16;
  template <typename Touch, typename Entry>
  void scan_walk(io::FastMemory& fast, Touch& touch, Entry& entry) {
    const int64_t* next = next_.data();
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
          visit_row(fast, r, window_begin, window_end, touch, entry);
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
  template <typename Touch, typename Entry>
  void queue_walk(io::FastMemory& fast, Touch& touch, Entry& entry) {
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
        visit_row(fast, r, window_begin, window_end, touch, entry);
        sift_down(next_[r] < s_.num_cols ? queue_key(r) : queue_[--queued_]);
      }
    }
  }

  int64_t queue_key(int64_t r) const { return next_[r] << 32 | r; }
  // The queue's keys fit in a word: columns below 2^31, rows below 2^32 (else the walk scans).
  bool queue_fits() const { return s_.num_cols < (int64_t{1} << 31) && rows_ < (int64_t{1} << 32); }

  // next_[r] = the column of row r's entry at its cursor (one index word), or num_cols past its
  // end.
  void peek(io::FastMemory& fast, int64_t r) {
    if (cursor_[r] < bounds_[r + 1]) {
      fast.load_word(io::Operand::mask, s_.idx, cursor_[r], 0, next_, r, io::WordKind::index);
    } else {
      next_[r] = s_.num_cols;
    }
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
  int64_t row0_ = 0;
  int64_t rows_ = 0;
  int64_t window_ = 0;  // windows are numbered from 1; markers start at 0
  io::FastBuffer<int64_t> bounds_;
  io::FastBuffer<int64_t> cursor_;
  io::FastBuffer<int64_t> next_;
  io::FastBuffer<int64_t> queue_;
  int64_t queued_ = 0;  // keys in the heap, queue_[0, queued_)
  io::FastBuffer<int64_t> marker_;
  io::FastBuffer<int64_t> position_;
};

// The number of chunks of `chunk` columns covering `width` (the last may be short).
inline int64_t chunk_count(int64_t width, int64_t chunk) { return (width + chunk - 1) / chunk; }

// The chunks a sweep streams its dense width in (the runs and the predictions): an SDDMM at least
// one (a width of 0 still writes its entries), an SpMM none when the width is 0 (nothing moves).
inline int64_t sweep_chunk_count(bool sddmm, int64_t width, int64_t chunk) {
  return sddmm ? std::max<int64_t>(1, chunk_count(width, chunk)) : chunk_count(width, chunk);
}

// ---- The two sweeps -----------------------------------------------------------------------------
// Hooks are duck-typed (static dispatch); their fast buffers are allocated by the caller before
// the sweep is called.

// SDDMM: values[p] = finish(r, sum_c A[row] . B[col]) at every entry p = (row, col) of the walked
// structure, the dense width streamed in chunks: partial sums go to the value array (booked as
// partial_op) between chunks, the last chunk stores hooks.finish(...) (booked as final_op). A panel
// rows are loaded only for rows with entries. Hooks:
//   begin_block(fast, walker)                         after the row pointers are loaded
//   begin_chunk(fast, walker, col0, width, panel, ld, b_rows)   after the A panel is loaded
//   float finish(fast, r, sum, position)              the last chunk's sum -> the stored value
//   end_block(fast, walker)
struct SddmmOperands {
  io::Operand a_op;
  SlowMatrix<const float> a;  // (rows, width)
  io::Operand b_op;
  SlowMatrix<const float> b;  // (cols, width)
  SlowMatrix<float> values;   // (nnz, 1), CSR order; partial sums are read back from it
  io::Operand partial_op;
  io::Operand final_op;
};

// A worker's share of a sweep: row blocks first_block, first_block + block_step, ... (one
// worker: all of them). Blocks share no state, so any split computes the same bits and the
// workers' words sum to the one-worker count.
struct BlockShare {
  int64_t first_block = 0;
  int64_t block_step = 1;
};

template <typename Hooks>
void sddmm_sweep(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                 const SparseSweepTiles& tiles, const SddmmOperands& op, Hooks& hooks,
                 const BlockShare& share = {}) {
  const int64_t ld = tiles.chunk;
  BlockWalker walker(fast, structure, tiles.block_rows, tiles.block_cols);
  io::FastBuffer<float> panel =
      fast.allocate<float>(tiles.block_rows * ld, "sparse_small_cache A panel");
  io::FastBuffer<float> b_rows =
      fast.allocate<float>(tiles.block_cols * ld, "sparse_small_cache B rows");
  io::FastBuffer<float> value = fast.allocate<float>(1, "sparse_small_cache entry value");
  // A dense width of 0 still has one (empty) chunk: the entries are written (S = 0).
  const int64_t chunks = sweep_chunk_count(true, width, ld);
  for (int64_t row0 = share.first_block * tiles.block_rows; row0 < structure.num_rows;
       row0 += share.block_step * tiles.block_rows) {
    walker.load_block(fast, row0, std::min(tiles.block_rows, structure.num_rows - row0));
    hooks.begin_block(fast, walker);
    if (walker.block_nnz() > 0) {
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t col0 = c * ld;
        const int64_t cols = std::min(ld, width - col0);
        const bool last = c + 1 == chunks;
        for (int64_t r = 0; r < walker.rows(); ++r) {
          if (walker.nonempty(r))
            fast.load(op.a_op, op.a, row0 + r, col0, 1, cols, panel, r * ld, ld);
        }
        hooks.begin_chunk(fast, walker, col0, cols, panel, ld, b_rows);
        walker.walk(
            fast,
            [&](int64_t col, int64_t slot) {
              fast.load(op.b_op, op.b, col, col0, 1, cols, b_rows, slot * ld, ld);
            },
            [&](int64_t r, int64_t slot, int64_t position) {
              // (small_cache_kernels: vectorized, in a fixed order whatever the thread count)
              float sum = small_cache_kernels::dot(panel.data() + r * ld, b_rows.data() + slot * ld, cols);
              if (c > 0) {
                fast.load_word(op.partial_op, op.values, position, 0, value, 0);
                sum = value[0] + sum;
              }
              value[0] = last ? hooks.finish(fast, r, sum, position) : sum;
              fast.store_word(last ? op.final_op : op.partial_op, value, 0, op.values, position, 0);
            });
      }
    }
    hooks.end_block(fast, walker);
  }
}

// SpMM: out[row] = alpha * sum over the row's entries p = (row, col) of
// hooks.transform(r, values[p]) * B[col], the output width in chunks, the accumulator panel stored
// once per chunk (rows without entries store zeros). Nothing moves when width == 0. Hooks:
//   begin_block(fast, walker)
//   float transform(r, value)
struct SpmmOperands {
  io::Operand value_op;
  SlowMatrix<float> values;  // (nnz, 1), CSR order (scratch of the schedule)
  io::Operand b_op;
  SlowMatrix<const float> b;  // (cols, width)
  io::Operand out_op;
  SlowMatrix<float> out;  // (rows, width)
  float alpha = 1.0f;
};

template <typename Hooks>
void spmm_sweep(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                const SparseSweepTiles& tiles, const SpmmOperands& op, Hooks& hooks,
                const BlockShare& share = {}) {
  if (width == 0) return;
  const int64_t ld = tiles.chunk;
  BlockWalker walker(fast, structure, tiles.block_rows, tiles.block_cols);
  io::FastBuffer<float> acc =
      fast.allocate<float>(tiles.block_rows * ld, "sparse_small_cache accumulator");
  io::FastBuffer<float> b_rows =
      fast.allocate<float>(tiles.block_cols * ld, "sparse_small_cache B rows");
  io::FastBuffer<float> value = fast.allocate<float>(1, "sparse_small_cache entry value");
  const int64_t chunks = sweep_chunk_count(false, width, ld);
  for (int64_t row0 = share.first_block * tiles.block_rows; row0 < structure.num_rows;
       row0 += share.block_step * tiles.block_rows) {
    walker.load_block(fast, row0, std::min(tiles.block_rows, structure.num_rows - row0));
    hooks.begin_block(fast, walker);
    const int64_t rows = walker.rows();
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t col0 = c * ld;
      const int64_t cols = std::min(ld, width - col0);
      std::fill(acc.data(), acc.data() + rows * ld, 0.0f);
      walker.walk(
          fast,
          [&](int64_t col, int64_t slot) {
            fast.load(op.b_op, op.b, col, col0, 1, cols, b_rows, slot * ld, ld);
          },
          [&](int64_t r, int64_t slot, int64_t position) {
            fast.load_word(op.value_op, op.values, position, 0, value, 0);
            small_cache_kernels::axpy(hooks.transform(r, value[0]), b_rows.data() + slot * ld,
                                      acc.data() + r * ld, cols);
          });
      if (op.alpha != 1.0f) {
        for (int64_t i = 0; i < rows * ld; ++i) acc[i] *= op.alpha;
      }
      fast.store(op.out_op, acc, 0, ld, op.out, row0, col0, rows, cols);
    }
  }
}

}  // namespace spattn::schedules::sparse_small_cache_detail
