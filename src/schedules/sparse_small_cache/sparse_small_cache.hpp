// The density-adaptive small-cache schedule: sparse attention over an element-level (unstructured)
// mask for a fast memory too small for block-sparse flash to pay off (theory.md section 5;
// formulas and choices in docs/sparse_small_cache.md). fp32, forward and backward, exact I/O.
//
// Like the dense small-cache schedule it materializes the score-shaped intermediates, but only at
// the mask's entries (nnz words, aligned with the CSR), and it does every product as one kind of
// sweep over the mask:
//
//   a row block of block_rows rows of the structure keeps a dense panel resident (block_rows x
//   chunk: the A operand of an SDDMM, or the accumulator of an SpMM); its entries are walked in
//   column order, a window of block_cols columns at a time, and the B row of each column is loaded
//   the first time an entry touches it in that window (block_cols x chunk words); the dense
//   dimension is streamed in chunks of `chunk` columns.
//
// A row block therefore reads every B row it touches once per chunk: sum over row blocks of the
// distinct columns it touches, times the dense width, about n^2 w / block_rows for masks with
// s block_rows >= 1. The entries (index and value words) are re-read once per chunk, about
// nnz w / chunk. With block_rows * chunk ~ M the two balance at chunk ~ sqrt(s M): I/O about
// n^2 w sqrt(s) / sqrt(M), the Z_input sqrt(Z_QK) / sqrt(M) shape of the sparse lower bound.
// block_rows and chunk are chosen per sweep by exact prediction (walking the mask), so the tile
// side follows the mask's density (a global choice per sweep; the distinct-column counts it
// minimizes are the mask's local structure).
//
// Forward (m = seqlen_q, n = seqlen_k):
//   S  = scale Q K^T at the mask        SDDMM sweep `scores`: partial sums of S written per chunk,
//                                       the last chunk finishes S and keeps the running row max
//                                       and sum, LSE written per row block
//   O  = exp(S - LSE) V                 SpMM sweep `output`: P made from S as it is loaded
// Backward:
//   P  = exp(scale Q K^T - LSE)         SDDMM sweep `probs`, P written
//   dS = P ∘ (dO V^T - D)               SDDMM sweep `d_scores`; D = rowsum(dO ∘ O) accumulated
//                                       per chunk from the dO panel it loads anyway (O rows
//                                       streamed through the B buffer): D never reaches slow
//                                       memory, `delta` is left untouched
//   dQ = scale dS K                     SpMM sweep `dq` over the rows
//   dK = scale dS^T Q,  dV = P^T dO     SpMM sweeps `dk`, `dv` over the transposed structure;
//                                       values gathered by their CSR position (an index word)
//
// Index words (row pointers, column / row indices, positions) move with WordKind::index as
// Operand::mask; S, P, dS (and the partial sums, booked as s and dp) as values.
#pragma once

#include "cpu/workers.hpp"
#include "schedules/common/head_problem.hpp"  // HeadShape, HeadForward, HeadBackward, IoCount, Pass
#include "schedules/sparse_small_cache/sparse_mask_counts.hpp"

#include <spattn/io.hpp>
#include <spattn/plan.hpp>  // PlanObjective and the time price's rates

#include <sparse_formats/csr.hpp>

#include <cstdint>
#include <vector>

namespace spattn::schedules {

// A mask prepared for the schedule, built once in O(nnz + seqlen_q + seqlen_k) time: a copy of the
// CSR (int64) and its transpose (CSC) with, per transposed entry, the position of the same entry
// in the CSR (so dK and dV find the values of S-shaped arrays stored in CSR order). Slow-memory
// words: seqlen_q + 1 + nnz (the copy) + seqlen_k + 1 + 2 nnz (the transpose). The constructor
// validates the pattern (sparse_formats::validate; FormatError naming "mask").
class SparseSmallCacheMask {
 public:
  explicit SparseSmallCacheMask(const sparse_formats::CsrPatternView<int64_t>& mask);

  int64_t seqlen_q() const { return seqlen_q_; }
  int64_t seqlen_k() const { return seqlen_k_; }
  int64_t nnz() const { return static_cast<int64_t>(col_idx_.size()); }
  int64_t nonempty_rows() const { return nonempty_rows_; }  // query rows with an entry
  int64_t nonempty_cols() const { return nonempty_cols_; }  // keys with an entry

  const std::vector<int64_t>& row_ptr() const { return row_ptr_; }  // (seqlen_q + 1)
  const std::vector<int64_t>& col_idx() const { return col_idx_; }  // (nnz)
  const std::vector<int64_t>& col_ptr() const { return col_ptr_; }  // (seqlen_k + 1)
  const std::vector<int64_t>& row_idx() const { return row_idx_; }  // (nnz), rows of each key
  const std::vector<int64_t>& csr_position() const { return csr_position_; }  // (nnz)

  // Sum over blocks of `block_rows` consecutive query rows of the distinct keys their entries
  // touch (the K / V rows an SpMM or SDDMM row block loads per chunk), and the same over blocks
  // of `block_cols` consecutive keys of the distinct query rows. O(nnz + rows) each.
  int64_t touched_keys(int64_t block_rows) const;
  int64_t touched_queries(int64_t block_cols) const;

 private:
  int64_t seqlen_q_ = 0;
  int64_t seqlen_k_ = 0;
  int64_t nonempty_rows_ = 0;
  int64_t nonempty_cols_ = 0;
  std::vector<int64_t> row_ptr_, col_idx_, col_ptr_, row_idx_, csr_position_;
};

// One sweep's tiles (see the top of this file): the row block, the column window and the chunk of
// the dense dimension. All >= 1.
struct SparseSweepTiles {
  int64_t block_rows = 1;
  int64_t block_cols = 1;
  int64_t chunk = 1;
  friend bool operator==(const SparseSweepTiles& a, const SparseSweepTiles& b) {
    return a.block_rows == b.block_rows && a.block_cols == b.block_cols && a.chunk == b.chunk;
  }
};

struct SparseSmallCacheTiles {
  Pass pass = Pass::forward;
  HeadShape shape;            // the problem they were chosen for (the schedules check it)
  int64_t cache_words = 0;    // M they were chosen for
  int64_t nnz = 0;            // the mask's entries (checked with its seqlens)
  SparseSweepTiles scores;    // forward: S = scale Q K^T (SDDMM, rows = queries, width d)
  SparseSweepTiles output;    // forward: O = exp(S - LSE) V (SpMM, rows = queries, width e)
  SparseSweepTiles probs;     // backward: P (SDDMM, queries, d)
  SparseSweepTiles d_scores;  // backward: dS (SDDMM, queries, e)
  SparseSweepTiles dq;        // backward: dQ (SpMM, queries, d)
  SparseSweepTiles dk;        // backward: dK (SpMM, rows = keys, width d)
  SparseSweepTiles dv;        // backward: dV (SpMM, keys, e)
};

// Words moved, value words (Q, K, V, O, LSE, dO, S, P, dS, ...) and index words (mask structure)
// apart.
struct SparseIo {
  IoCount values;
  IoCount indices;
  IoCount total() const { return values + indices; }
  SparseIo& operator+=(const SparseIo& other) {
    values += other.values;
    indices += other.indices;
    return *this;
  }
};

// The smallest M the schedule runs with (1-row blocks, 1-column windows, 1-wide chunks, and the
// row statistics): 10 words forward and backward, whatever the shape.
int64_t sparse_small_cache_min_cache_words(Pass pass);

// Chooses each sweep's tiles for fast memory of `cache_words` words: for every chunk width that
// gives a distinct number of chunks (about 2 sqrt(d) widths), three row blocks (the largest that
// fits, as many evenly sized, the largest power of two below), each priced by the exact
// prediction (walking the mask: O(nnz + rows) per row block size, memoized).
//   objective words: the fewest words; the column window takes the memory left (it changes no
//     count, only how often the rows are scanned: usually 1 column).
//   objective time: the smallest sparse_small_cache_time_price (below); at the best chunk the
//     candidates also reserve windows of 16, 64, 256 and 1024 columns (a wide window costs some
//     of the row block, and lets a walk find its rows once per window instead of once per
//     column). The price also prefers fewer chunks (each re-walks the entries): on uniform
//     random masks at n 4096 the time tiles take the whole head_dim in one chunk with blocks of
//     about 100 to 700 rows, 1.6x to 3.5x the fewest words, and run 2x to 5x faster. A tie keeps
//     the smaller row block (the same words in evenly sized blocks share better between workers).
// Both are deterministic in (shape, mask, M, pass, objective), never in the thread count; the
// window and the row block change no bit of the results, the chunk does (the order of the sums).
// Throws InvalidArgument stating the minimum when cache_words is below it, or when the shape
// disagrees with the mask or has a negative size.
SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape,
                                               const SparseSmallCacheMask& mask,
                                               int64_t cache_words, Pass pass,
                                               PlanObjective objective = PlanObjective::words);

// The same choice from the mask's counts alone (sparse_mask_counts.hpp; equal tiles): the planner
// prices small_cache this way, without building a SparseSmallCacheMask.
SparseSmallCacheTiles sparse_small_cache_tiles(const HeadShape& shape, const SparseMaskCounts& mask,
                                               int64_t cache_words, Pass pass,
                                               PlanObjective objective = PlanObjective::words);

// What a native run does besides moving words, estimated from the mask's counts (an estimate:
// per-block averages; PlanObjective::time prices it, nothing counts it).
struct SparseSmallCacheWork {
  int64_t entry_visits = 0;  // entries x chunks over the sweeps: one dot or axpy of a chunk each
  int64_t walk_steps = 0;    // rows the walks check (scans) or heap steps (queues), the cheaper per
                             // block as BlockWalker chooses
  int64_t flops = 0;         // small_cache_flops (arithmetic.hpp)
};
SparseSmallCacheWork estimate_sparse_small_cache_work(const HeadShape& shape, const SparseMaskCounts& mask,
                                                      const SparseSmallCacheTiles& tiles);

// PlanObjective::time's price of a run with `words` moved and `work` done, in flops of flash's
// kernels, at spattn::time_rates() (per word, entry visit, walk step and flop).
int64_t sparse_small_cache_time_price(int64_t words, const SparseSmallCacheWork& work);

// The most words the schedule holds in fast memory with these tiles (<= cache_words), exactly.
int64_t sparse_small_cache_fast_words(const SparseSmallCacheTiles& tiles);

// Exact words moved (docs/sparse_small_cache.md), computed from the mask's structure (nonempty
// rows, distinct columns per row block), never by running the schedule. O(nnz + m + n).
SparseIo predict_sparse_small_cache_forward(const HeadShape& shape,
                                            const SparseSmallCacheMask& mask,
                                            const SparseSmallCacheTiles& tiles);
SparseIo predict_sparse_small_cache_backward(const HeadShape& shape,
                                             const SparseSmallCacheMask& mask,
                                             const SparseSmallCacheTiles& tiles);
// The same from the mask's counts alone (equal results).
SparseIo predict_sparse_small_cache_forward(const HeadShape& shape, const SparseMaskCounts& mask,
                                            const SparseSmallCacheTiles& tiles);
SparseIo predict_sparse_small_cache_backward(const HeadShape& shape, const SparseMaskCounts& mask,
                                             const SparseSmallCacheTiles& tiles);

// The schedules. Scratch slow memory for the nnz-long value arrays (S; P and dS) is owned by the
// call. Throw InvalidArgument when the operands' shapes disagree with each other, with the mask
// or with tiles.shape, or the tiles are for the other pass or another mask; RuntimeError when
// fast memory has fewer than sparse_small_cache_fast_words(tiles) words free. Either way before
// anything is written. Empty rows: O = 0, LSE = -inf, no gradient contribution.
void sparse_small_cache_forward(io::FastMemory& fast, const HeadForward& head,
                                const SparseSmallCacheMask& mask,
                                const SparseSmallCacheTiles& tiles);
void sparse_small_cache_backward(io::FastMemory& fast, const HeadBackward& head,
                                 const SparseSmallCacheMask& mask,
                                 const SparseSmallCacheTiles& tiles);

// The same schedules on a team of workers, one thread and one fast memory each (the model: M per
// core): each sweep's row blocks (key blocks for dK and dV) are split round-robin over the
// workers, who meet between sweeps that read what the one before wrote (S after the scores; P,
// then dS). Each block is computed by one worker exactly as in the one-worker schedule, so the
// results are bit-identical for any number of workers and the words the workers move sum to the
// prediction (each worker's peak is at most sparse_small_cache_fast_words). Checks as above, on
// every worker's fast memory. A sweep has ceil(rows / block_rows) blocks: large tiles (a large M
// over a short sequence) leave workers idle.
void sparse_small_cache_forward(cpu::WorkerMemories& workers, const HeadForward& head,
                                const SparseSmallCacheMask& mask, const SparseSmallCacheTiles& tiles);
void sparse_small_cache_backward(cpu::WorkerMemories& workers, const HeadBackward& head,
                                 const SparseSmallCacheMask& mask, const SparseSmallCacheTiles& tiles);

namespace sparse_small_cache_detail {

// What distinguishes the seven sweeps: words kept per row of the row block besides the index
// state (row statistics), scratch words per entry, and whether it walks the transpose.
enum class Sweep { scores, output, probs, d_scores, dq, dk, dv };
struct SweepTraits {
  bool sddmm;           // SDDMM (A panel resident, entries written) or SpMM (accumulator)
  bool transposed;      // walks keys (the CSC) instead of queries
  int64_t row_words;    // row statistics: max + sum, LSE, D, or none
  int64_t entry_words;  // per-entry scratch: the value, + P (dS), + position (transposed)
};
SweepTraits sweep_traits(Sweep sweep);
// Index words the walk keeps per row of the block (sparse_small_cache_walk.hpp): its row pointer,
// cursor, next column and queue slot.
inline constexpr int64_t kRowIndexWords = 4;
// Fast memory of one sweep: block_rows (chunk + kRowIndexWords + row_words) + 1 (row pointers,
// cursors, next columns, queue, statistics, panel) + block_cols (chunk + 1) (B rows and their
// markers) + entry_words.
int64_t sweep_fast_words(Sweep sweep, const SparseSweepTiles& tiles);
// The exact words one sweep moves, with w its dense width (d or e). Zero for an SpMM with w = 0.
SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseSmallCacheMask& mask,
                       const SparseSweepTiles& tiles);
SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                       const SparseSweepTiles& tiles);

void check_tiles(const char* where, const HeadShape& shape, const SparseSmallCacheMask& mask,
                 const SparseSmallCacheTiles& tiles, Pass pass);
void check_room(const char* where, const io::FastMemory& fast, const SparseSmallCacheTiles& tiles);

}  // namespace sparse_small_cache_detail

}  // namespace spattn::schedules
