// Private to the sparse small-cache schedule: its two kinds of sweep over a mask, the SDDMM and
// the SpMM (sparse_small_cache.hpp; docs/sparse_small_cache.md, "The sweep"), on the walk of
// sparse_small_cache_walk.hpp.
#pragma once

#include "cpu/kernels/small_cache_kernels.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache_walk.hpp"

#include <spattn/io.hpp>

#include <algorithm>
#include <cstdint>

namespace spattn::schedules::sparse_small_cache_detail {

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

// SDDMM: values[p] = finish(r, sum_c A[row] . B[col], companion[p]) at every entry p = (row, col)
// of the walked structure (never transposed), the dense width streamed in chunks: partial sums go
// to the value array (booked as partial_op) between chunks, the last chunk stores
// hooks.finish(...) (booked as final_op). Entry values move in the walk's runs: a run's partial
// sums are loaded before its first entry (chunks after the first) and the run is stored after its
// last; the companion values (an optional second array in CSR order, read in the last chunk) are
// loaded the same way. A panel rows are loaded only for rows with entries. Hooks:
//   begin_block(fast, walker)                         after the row pointers are loaded
//   begin_chunk(fast, walker, col0, width, panel, ld, b_rows)   after the A panel is loaded
//   float finish(r, sum, companion)                   the last chunk's sum -> the stored value
//                                                     (companion 0 without a companion array)
//   end_block(fast, walker)
struct SddmmOperands {
  io::Operand a_op;
  SlowMatrix<const float> a;  // (rows, width)
  io::Operand b_op;
  SlowMatrix<const float> b;  // (cols, width)
  SlowMatrix<float> values;   // (nnz, 1), CSR order; partial sums are read back from it
  io::Operand partial_op;
  io::Operand final_op;
  io::Operand companion_op = io::Operand::other;  // other: no companion array
  SlowMatrix<const float> companion = {};        // (nnz, 1), CSR order
  bool has_companion() const { return companion_op != io::Operand::other; }
};

// A worker's share of a sweep: row blocks first_block, first_block + block_step, ... (one
// worker: all of them). Blocks share no state, so any split computes the same bits and the
// workers' words sum to the one-worker count.
struct BlockShare {
  int64_t first_block = 0;
  int64_t block_step = 1;
};

// Moves one run of entry values between a value array (CSR order) and a run buffer (kRuns: runs
// of more than one word).
template <bool kRuns>
struct RunMoves {
  io::FastMemory& fast;
  const BlockWalker& walker;
  template <typename S>
  void load(io::Operand op, const SlowMatrix<S>& from, io::FastBuffer<float>& buffer, int64_t r,
            int64_t begin, int64_t end) const {
    if constexpr (kRuns) {
      fast.load_run(op, from, begin, end - begin, buffer, walker.run_slot<true>(r, begin));
    } else {
      fast.load_word(op, from, begin, 0, buffer, 0);
    }
  }
  void store(io::Operand op, const io::FastBuffer<float>& buffer, const SlowMatrix<float>& to, int64_t r,
             int64_t begin, int64_t end) const {
    if constexpr (kRuns) {
      fast.store_run(op, buffer, walker.run_slot<true>(r, begin), to, begin, end - begin);
    } else {
      fast.store_word(op, buffer, 0, to, begin, 0);
    }
  }
};

// The SDDMM's run moves in one chunk (BlockWalker::walk's `runs`).
template <bool kRuns>
struct SddmmRuns {
  const RunMoves<kRuns>& moves;
  const SddmmOperands& op;
  io::FastBuffer<float>& values;
  io::FastBuffer<float>& companion;
  bool first_chunk, last_chunk;
  void begin_run(int64_t r, int64_t begin, int64_t end) {
    if (!first_chunk) moves.load(op.partial_op, op.values, values, r, begin, end);
    if (last_chunk && op.has_companion()) moves.load(op.companion_op, op.companion, companion, r, begin, end);
  }
  void end_run(int64_t r, int64_t begin, int64_t end) {
    moves.store(last_chunk ? op.final_op : op.partial_op, values, op.values, r, begin, end);
  }
};

template <bool kRuns, typename Hooks>
void sddmm_sweep_in_runs(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                         const SparseSweepTiles& tiles, const SddmmOperands& op, Hooks& hooks, const BlockShare& share) {
  const int64_t ld = tiles.chunk;
  BlockWalker walker(fast, structure, tiles.block_rows, tiles.block_cols, tiles.run);
  io::FastBuffer<float> panel =
      fast.allocate<float>(tiles.block_rows * ld, "sparse_small_cache A panel");
  io::FastBuffer<float> b_rows =
      fast.allocate<float>(tiles.block_cols * ld, "sparse_small_cache B rows");
  const int64_t run_words = BlockWalker::run_buffer_words(tiles.block_rows, tiles.run);
  io::FastBuffer<float> values = fast.allocate<float>(run_words, "sparse_small_cache entry values");
  const bool has_companion = op.has_companion();
  io::FastBuffer<float> companion =
      fast.allocate<float>(has_companion ? run_words : 0, "sparse_small_cache companion values");
  const RunMoves<kRuns> moves{fast, walker};
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
        walker.walk_with<kRuns>(
            fast,
            [&](int64_t col, int64_t slot) {
              fast.load(op.b_op, op.b, col, col0, 1, cols, b_rows, slot * ld, ld);
            },
            [&](int64_t r, int64_t slot, int64_t position) {
              // (small_cache_kernels: vectorized, in a fixed order whatever the thread count)
              float sum = small_cache_kernels::dot(panel.data() + r * ld, b_rows.data() + slot * ld, cols);
              const int64_t at = walker.run_slot<kRuns>(r, position);
              float& value = values[at];
              if (c > 0) sum = value + sum;
              value = last ? hooks.finish(r, sum, has_companion ? companion[at] : 0.0f) : sum;
            },
            SddmmRuns<kRuns>{moves, op, values, companion, c == 0, last});
      }
    }
    hooks.end_block(fast, walker);
  }
}

template <typename Hooks>
void sddmm_sweep(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                 const SparseSweepTiles& tiles, const SddmmOperands& op, Hooks& hooks,
                 const BlockShare& share = {}) {
  if (tiles.run > 1) {
    sddmm_sweep_in_runs<true>(fast, structure, width, tiles, op, hooks, share);
  } else {
    sddmm_sweep_in_runs<false>(fast, structure, width, tiles, op, hooks, share);
  }
}

// SpMM: out[row] = alpha * sum over the row's entries p = (row, col) of
// hooks.transform(r, values[p]) * B[col], the output width in chunks, the accumulator panel stored
// once per chunk (rows without entries store zeros). Nothing moves when width == 0. The values
// move in the walk's runs over the CSR; a transposed walk (rows = keys) gathers them at their CSR
// positions (alone, or in pieces: GatheredPieces). Hooks:
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

// A transposed SpMM's values (dS for dK, P for dV), gathered at their CSR positions in pieces
// (runs of more than one word; word at a time each value moves alone, through one word of the
// sweep's value buffer). The piece of `run` positions holding a position (cut at multiples of
// run, so inside one line) moves whole the first time a walk needs it and serves the walk's next
// positions in it: with 1-column windows a key block's walk meets its entries in CSR order (query
// by query, then key by key), so it loads each piece once (SparseMaskCounts::gathers). Fast
// memory: run values and the piece held (an index word), none for run 0 (no gathers in pieces).
class GatheredPieces {
 public:
  GatheredPieces(io::FastMemory& fast, io::Operand op, const SlowMatrix<float>& from, int64_t run)
      : fast_(fast),
        op_(op),
        from_(from),
        run_(run),
        values_(fast.allocate<float>(run, "sparse_small_cache gathered values")),
        held_(fast.allocate<int64_t>(run > 0 ? 1 : 0, "sparse_small_cache gathered piece")) {}
  // Before each walk: no piece held.
  void restart() {
    if (run_ > 0) held_[0] = -1;
  }
  float at(int64_t position) {
    const int64_t piece = position - (position & (run_ - 1));
    if (held_[0] != piece) {
      held_[0] = piece;
      fast_.load_run(op_, from_, piece, std::min(run_, from_.rows() - piece), values_, 0);
    }
    return values_[position - piece];
  }

 private:
  io::FastMemory& fast_;
  io::Operand op_;
  SlowMatrix<float> from_;
  int64_t run_;
  io::FastBuffer<float> values_;
  io::FastBuffer<int64_t> held_;
};

// The SpMM's run moves (BlockWalker::walk's `runs`): none when it gathers.
template <bool kRuns>
struct SpmmRuns {
  const RunMoves<kRuns>& moves;
  const SpmmOperands& op;
  io::FastBuffer<float>& values;
  bool gathers;
  void begin_run(int64_t r, int64_t begin, int64_t end) {
    if (!gathers) moves.load(op.value_op, op.values, values, r, begin, end);
  }
  void end_run(int64_t /*r*/, int64_t /*begin*/, int64_t /*end*/) {}
};

template <bool kRuns, typename Hooks>
void spmm_sweep_in_runs(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                        const SparseSweepTiles& tiles, const SpmmOperands& op, Hooks& hooks, const BlockShare& share) {
  const int64_t ld = tiles.chunk;
  BlockWalker walker(fast, structure, tiles.block_rows, tiles.block_cols, tiles.run);
  io::FastBuffer<float> acc =
      fast.allocate<float>(tiles.block_rows * ld, "sparse_small_cache accumulator");
  io::FastBuffer<float> b_rows =
      fast.allocate<float>(tiles.block_cols * ld, "sparse_small_cache B rows");
  const bool gathers = structure.transposed;
  // Entry values: runs over the CSR, or (gathering word at a time) one word; gathers in pieces
  // have their own buffer.
  io::FastBuffer<float> values = fast.allocate<float>(
      gathers ? (kRuns ? 0 : 1) : BlockWalker::run_buffer_words(tiles.block_rows, tiles.run),
      "sparse_small_cache entry values");
  GatheredPieces pieces(fast, op.value_op, op.values, gathers && kRuns ? tiles.run : 0);
  const RunMoves<kRuns> moves{fast, walker};
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
      pieces.restart();
      walker.walk_with<kRuns>(
          fast,
          [&](int64_t col, int64_t slot) {
            fast.load(op.b_op, op.b, col, col0, 1, cols, b_rows, slot * ld, ld);
          },
          [&](int64_t r, int64_t slot, int64_t position) {
            float value;
            if (!gathers) {
              value = values[walker.run_slot<kRuns>(r, position)];
            } else if constexpr (kRuns) {
              value = pieces.at(position);
            } else {
              fast.load_word(op.value_op, op.values, position, 0, values, 0);
              value = values[0];
            }
            small_cache_kernels::axpy(hooks.transform(r, value), b_rows.data() + slot * ld,
                                      acc.data() + r * ld, cols);
          },
          SpmmRuns<kRuns>{moves, op, values, gathers});
      if (op.alpha != 1.0f) {
        for (int64_t i = 0; i < rows * ld; ++i) acc[i] *= op.alpha;
      }
      fast.store(op.out_op, acc, 0, ld, op.out, row0, col0, rows, cols);
    }
  }
}

template <typename Hooks>
void spmm_sweep(io::FastMemory& fast, const WalkStructure& structure, int64_t width,
                const SparseSweepTiles& tiles, const SpmmOperands& op, Hooks& hooks,
                const BlockShare& share = {}) {
  if (width == 0) return;
  if (tiles.run > 1) {
    spmm_sweep_in_runs<true>(fast, structure, width, tiles, op, hooks, share);
  } else {
    spmm_sweep_in_runs<false>(fast, structure, width, tiles, op, hooks, share);
  }
}

}  // namespace spattn::schedules::sparse_small_cache_detail
