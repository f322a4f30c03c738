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
//                                       values gathered by their CSR position (an index word),
//                                       with runs a piece of `run` positions at a time
//
// Index words (row pointers, column / row indices, positions) move with WordKind::index as
// Operand::mask; S, P, dS (and the partial sums, booked as s and dp) as values.
#pragma once

#include "cpu/workers.hpp"
#include "schedules/common/head_problem.hpp"  // HeadShape, HeadForward, HeadBackward, IoCount, Pass
#include "schedules/common/line_aligned_array.hpp"
#include "schedules/sparse_small_cache/sparse_mask_counts.hpp"

#include <spattn/error.hpp>
#include <spattn/io.hpp>
#include <spattn/types.hpp>  // Pass

#include <sparse_formats/csr.hpp>
#include <sparse_formats/intervals.hpp>

#include <cstdint>
#include <iosfwd>
#include <vector>

namespace spattn::schedules {

// The most attended pairs the schedule runs over: it materializes S, P and dS at every pair, and
// three int64 index words per pair (about 40 bytes a pair), so 2^31 pairs need about 80 GiB of
// slow memory. Past it the planner does not price it (nor walk the mask's pairs to count them).
inline constexpr int64_t kSparseSmallCacheMaxEntries = int64_t{1} << 31;

// The prepared mask's index arrays: int64, starting on a line (the walks move them in runs of
// whole line parts; schedules/common/line_aligned_array.hpp).
using IndexArray = std::vector<int64_t, LineAlignedAllocator<int64_t>>;

// A mask prepared for the schedule, built once in O(nnz + seqlen_q + seqlen_k) time: a copy of the
// CSR (int64) and its transpose (CSC) with, per transposed entry, the position of the same entry
// in the CSR (so dK and dV find the values of S-shaped arrays stored in CSR order). Slow-memory
// words: seqlen_q + 1 + nnz (the copy) + seqlen_k + 1 + 2 nnz (the transpose). The constructor
// validates the pattern (sparse_formats::validate; FormatError naming "mask").
class SparseSmallCacheMask {
 public:
  explicit SparseSmallCacheMask(const sparse_formats::CsrPatternView<int32_t>& mask);
  explicit SparseSmallCacheMask(const sparse_formats::CsrPatternView<int64_t>& mask);
  // The same arrays from an interval mask (sparse_formats::validate(IntervalPattern)), built from
  // its intervals: no CSR of the mask is made on the way.
  explicit SparseSmallCacheMask(const sparse_formats::IntervalPattern& mask);

  int64_t seqlen_q() const { return seqlen_q_; }
  int64_t seqlen_k() const { return seqlen_k_; }
  int64_t nnz() const { return static_cast<int64_t>(col_idx_.size()); }
  int64_t nonempty_rows() const { return nonempty_rows_; }  // query rows with an entry
  int64_t nonempty_cols() const { return nonempty_cols_; }  // keys with an entry

  const IndexArray& row_ptr() const { return row_ptr_; }  // (seqlen_q + 1)
  const IndexArray& col_idx() const { return col_idx_; }  // (nnz)
  const IndexArray& col_ptr() const { return col_ptr_; }  // (seqlen_k + 1)
  const IndexArray& row_idx() const { return row_idx_; }  // (nnz), rows of each key
  const IndexArray& csr_position() const { return csr_position_; }  // (nnz)

  // Sum over blocks of `block_rows` consecutive query rows of the distinct keys their entries
  // touch (the K / V rows an SpMM or SDDMM row block loads per chunk), and the same over blocks
  // of `block_cols` consecutive keys of the distinct query rows. O(nnz + rows) each.
  int64_t touched_keys(int64_t block_rows) const;
  int64_t touched_queries(int64_t block_cols) const;

 private:
  template <typename Index>
  void build(const sparse_formats::CsrPatternView<Index>& mask);
  void build_transpose();  // col_ptr_, row_idx_, csr_position_ and the counts, from row_ptr_, col_idx_
  int64_t seqlen_q_ = 0;
  int64_t seqlen_k_ = 0;
  int64_t nonempty_rows_ = 0;
  int64_t nonempty_cols_ = 0;
  IndexArray row_ptr_, col_idx_, col_ptr_, row_idx_, csr_position_;
};

// One sweep's tiles (see the top of this file): the row block, the column window and the chunk of
// the dense dimension. All >= 1.
// `run`: the entry values that move together, cut at multiples of `run` positions of the CSR
// arrays (index words in runs of index_run(run)): a power of two dividing the line size the tiles
// were chosen for, so that each run lies inside one line; 1 moves each word alone
// (sparse_small_cache_walk.hpp).
struct SparseSweepTiles {
  int64_t block_rows = 1;
  int64_t block_cols = 1;
  int64_t chunk = 1;
  int64_t run = 1;
  friend bool operator==(const SparseSweepTiles& a, const SparseSweepTiles& b) {
    return a.block_rows == b.block_rows && a.block_cols == b.block_cols && a.chunk == b.chunk &&
           a.run == b.run;
  }
};
// "rows r x cols c, chunk k" and ", run u" for runs of more than one.
std::ostream& operator<<(std::ostream& out, const SparseSweepTiles& tiles);

struct SparseSmallCacheTiles {
  Pass pass = Pass::forward;
  HeadShape shape;            // the problem they were chosen for (the schedules check it)
  int64_t cache_words = 0;    // M they were chosen for
  int64_t nnz = 0;            // the mask's entries (checked with its seqlens)
  int64_t line_words = 1;     // L they were chosen for (io.hpp's line model; 1 = words)
  SparseSweepTiles scores;    // forward: S = scale Q K^T (SDDMM, rows = queries, width d)
  SparseSweepTiles output;    // forward: O = exp(S - LSE) V (SpMM, rows = queries, width e)
  SparseSweepTiles probs;     // backward: P (SDDMM, queries, d)
  SparseSweepTiles d_scores;  // backward: dS (SDDMM, queries, e)
  SparseSweepTiles dq;        // backward: dQ (SpMM, queries, d)
  SparseSweepTiles dk;        // backward: dK (SpMM, rows = keys, width d)
  SparseSweepTiles dv;        // backward: dV (SpMM, keys, e)
  friend bool operator==(const SparseSmallCacheTiles& a, const SparseSmallCacheTiles& b) {
    return a.pass == b.pass && a.shape == b.shape && a.cache_words == b.cache_words && a.nnz == b.nnz &&
           a.line_words == b.line_words && a.scores == b.scores && a.output == b.output && a.probs == b.probs &&
           a.d_scores == b.d_scores && a.dq == b.dq && a.dk == b.dk && a.dv == b.dv;
  }
};
// The pass, what they were chosen for, and each sweep's tiles (print_tile_list).
std::ostream& operator<<(std::ostream& out, const SparseSmallCacheTiles& tiles);
// Each sweep's tiles, "S ...; O ..." (forward) or "P ...; dS ...; dQ ...; dK ...; dV ...": the
// plan's text (AlgorithmCost::tiles).
std::ostream& print_tile_list(std::ostream& out, const SparseSmallCacheTiles& tiles);

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

// What a native run does besides moving words, estimated from the mask's counts (an estimate:
// per-block averages; the planner's time objective prices it, nothing counts it).
struct SparseSmallCacheWork {
  int64_t entry_visits = 0;  // entries x chunks over the sweeps: one dot or axpy of a chunk each
  int64_t walk_steps = 0;    // rows the walks check (scans) or heap steps (queues), the cheaper per
                             // block as BlockWalker chooses
  int64_t flops = 0;         // small_cache_flops (small_cache.hpp)
};
SparseSmallCacheWork estimate_sparse_small_cache_work(const HeadShape& shape, const SparseMaskCounts& mask,
                                                      const SparseSmallCacheTiles& tiles);

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
// Exact lines of tiles.line_words words moved (io.hpp's rule; docs/sparse_small_cache.md, "Exact
// lines"), values and indices apart, for dense row-major Q, K, V, O, dO and their gradients (as
// predict_small_cache_*_lines), from the mask's counts. O(m + n + blocks) past the counts.
SparseIo predict_sparse_small_cache_forward_lines(const HeadShape& shape, const SparseMaskCounts& mask,
                                                  const SparseSmallCacheTiles& tiles);
SparseIo predict_sparse_small_cache_backward_lines(const HeadShape& shape, const SparseMaskCounts& mask,
                                                   const SparseSmallCacheTiles& tiles);

// The schedules. Scratch slow memory for the nnz-long value arrays (S; P and dS) is owned by the
// call. Throw InvalidArgument when the operands' shapes disagree with each other; a mask or tiles
// for another shape, pass or mask are a caller's bug (asserted); RuntimeError when
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
// state (row statistics), the arrays it moves in runs of entries, and whether it walks the
// transpose (then it gathers each entry's value at its CSR position: alone, or with runs the piece
// of `run` positions holding it, once per walk; a transposed sweep with runs has 1-column windows,
// so that its walk meets the CSR positions in increasing order).
enum class Sweep { scores, output, probs, d_scores, dq, dk, dv };
struct SweepTraits {
  bool sddmm;          // SDDMM (A panel resident, entries written) or SpMM (accumulator)
  bool transposed;     // walks keys (the CSC) instead of queries; gathers its values
  int64_t row_words;   // row statistics: max + sum, LSE, D, or none
  int64_t entry_runs;  // arrays moved in runs besides the column indices: the values, + P (dS);
                       // transposed: the positions
};
SweepTraits sweep_traits(Sweep sweep);
// Index words the walk keeps per row of the block (sparse_small_cache_walk.hpp): its row pointer,
// cursor, next column and queue slot.
inline constexpr int64_t kRowIndexWords = 4;
// Fast memory of one sweep: block_rows (chunk + kRowIndexWords + row_words) + 1 (row pointers,
// cursors, next columns, queue, statistics, panel) + block_cols (chunk + 1) (B rows and their
// markers) + the run buffers: with run = 1 one word per array moved in runs (entry_runs), with
// run > 1 block_rows run_words_per_row (below) + gather_words(run) (transposed).
int64_t sweep_fast_words(Sweep sweep, const SparseSweepTiles& tiles);
// What a transposed sweep holds of the values it gathers: one value (run = 1), or a piece of `run`
// values and the index word saying which piece it is (sparse_small_cache_sweeps.hpp, GatheredPieces).
inline int64_t gather_words(int64_t run) { return run > 1 ? run + 1 : 1; }
// The runs of the 8-byte index arrays (column / row indices, positions): half the values' runs
// of 4-byte words (at least 1), so that an index run covers the bytes a value run does and lies
// inside one line of the arrays (which start on a line).
inline int64_t index_run(int64_t run) { return run > 1 ? run / 2 : 1; }
// The run buffers' words per row of the block when run > 1: a value run per array moved in runs
// (not transposed) and an index run of the column indices, or (transposed) index runs of the row
// indices and the positions.
int64_t run_words_per_row(const SweepTraits& traits, int64_t run);
// The exact words one sweep moves, with w its dense width (d or e). Zero for an SpMM with w = 0.
SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseSmallCacheMask& mask,
                       const SparseSweepTiles& tiles);
SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                       const SparseSweepTiles& tiles);


// The sweeps of a pass, in the order they run.
struct SweepList {
  const Sweep* first;
  const Sweep* last;
  const Sweep* begin() const { return first; }
  const Sweep* end() const { return last; }
};
SweepList sweeps_of(Pass pass);
const SparseSweepTiles& tiles_of(const SparseSmallCacheTiles& tiles, Sweep sweep);
SparseSweepTiles& tiles_of(SparseSmallCacheTiles& tiles, Sweep sweep);
// The dense width a sweep streams: head_dim_v for O, dS and dV, else head_dim.
int64_t sweep_width(Sweep sweep, const HeadShape& shape);
// The counts of a prepared mask, over its own CSR copy (O(nnz)).
SparseMaskCounts counts_of(const SparseSmallCacheMask& mask);
// The words of one sweep, given `touched` = the sum over its row blocks of the distinct B rows
// they touch (docs/sparse_small_cache.md, "Exact words").
SparseIo sweep_io(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                  const SparseSweepTiles& tiles, int64_t touched);
// touched for a sweep's row blocks (SparseMaskCounts remembers each block size's count).
int64_t touched_of(const SparseMaskCounts& mask, bool transposed, int64_t block_rows);
// The lines of one sweep (line_words words each), given `touched` as above.
SparseIo sweep_lines(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                     const SparseSweepTiles& tiles, int64_t touched, int64_t line_words);
// One sweep's share of SparseSmallCacheWork with these tiles.
int64_t sweep_walk_steps(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                         const SparseSweepTiles& tiles, int64_t touched);
int64_t sweep_entry_visits(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                           const SparseSweepTiles& tiles);

// InvalidArgument naming `where` for a negative size, or a mask (SparseSmallCacheMask or
// SparseMaskCounts) of another shape than the problem's.
void check_shape(const char* where, const HeadShape& shape);
template <typename MaskLike>
void check_mask(const char* where, const HeadShape& shape, const MaskLike& mask) {
  if (mask.seqlen_q() != shape.seqlen_q || mask.seqlen_k() != shape.seqlen_k) {
    fail(where, ": the mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(),
         ", the problem has seqlen_q ", shape.seqlen_q, ", seqlen_k ", shape.seqlen_k);
  }
}

void check_tiles(const char* where, const HeadShape& shape, const SparseSmallCacheMask& mask,
                 const SparseSmallCacheTiles& tiles, Pass pass);
void check_room(const char* where, const io::FastMemory& fast, const SparseSmallCacheTiles& tiles);

}  // namespace sparse_small_cache_detail

}  // namespace spattn::schedules
