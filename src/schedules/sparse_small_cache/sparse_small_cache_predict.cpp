// The sparse small-cache schedule's prepared mask and its exact I/O prediction, computed from the
// mask's structure (the planner chooses the tiles: plan/sparse_small_cache_tile_choice.hpp). Derivations:
// docs/sparse_small_cache.md.
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache_sweeps.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/intervals.hpp>
#include <sparse_formats/validate.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <sstream>

namespace spattn::schedules {

// ---- the prepared mask ------------------------------------------------------------------------

SparseSmallCacheMask::SparseSmallCacheMask(const sparse_formats::CsrPatternView<int32_t>& mask) { build(mask); }
SparseSmallCacheMask::SparseSmallCacheMask(const sparse_formats::CsrPatternView<int64_t>& mask) { build(mask); }

// The copy is int64 whatever the mask's index type: its arrays are the schedule's slow memory.
template <typename Index>
void SparseSmallCacheMask::build(const sparse_formats::CsrPatternView<Index>& mask) {
  // A view cannot know its arrays' lengths: they are taken to be what the view says (nnz is read
  // only once the shape is known to be sane).
  const bool readable = mask.row_ptr != nullptr && mask.num_rows >= 0;
  sparse_formats::validate(mask, mask.num_rows >= 0 ? mask.num_rows + 1 : 0,
                           readable ? mask.nnz() : 0, "mask");
  seqlen_q_ = mask.num_rows;
  seqlen_k_ = mask.num_cols;
  row_ptr_.assign(mask.row_ptr, mask.row_ptr + seqlen_q_ + 1);
  col_idx_.assign(mask.col_idx, mask.col_idx + mask.nnz());
  build_transpose();
}

// The copy from the intervals' own CSR, freed before the transpose: no CSR of the mask is kept.
SparseSmallCacheMask::SparseSmallCacheMask(const sparse_formats::IntervalPattern& mask) {
  sparse_formats::validate(mask, "mask");
  seqlen_q_ = mask.num_rows;
  seqlen_k_ = mask.num_cols;
  {
    const sparse_formats::CsrPattern<int64_t> csr = sparse_formats::intervals_to_csr<int64_t>(mask);
    row_ptr_.assign(csr.row_ptr.begin(), csr.row_ptr.end());
    col_idx_.assign(csr.col_idx.begin(), csr.col_idx.end());
  }
  build_transpose();
}

void SparseSmallCacheMask::build_transpose() {
  const int64_t nnz = static_cast<int64_t>(col_idx_.size());
  // The transpose by counting sort: keys' entries come out in increasing row order.
  col_ptr_.assign(static_cast<size_t>(seqlen_k_ + 1), 0);
  for (int64_t col : col_idx_) ++col_ptr_[static_cast<size_t>(col + 1)];
  for (int64_t j = 0; j < seqlen_k_; ++j) {
    col_ptr_[static_cast<size_t>(j + 1)] += col_ptr_[static_cast<size_t>(j)];
  }
  row_idx_.resize(static_cast<size_t>(nnz));
  csr_position_.resize(static_cast<size_t>(nnz));
  std::vector<int64_t> fill(col_ptr_.begin(), col_ptr_.end() - 1);
  for (int64_t i = 0; i < seqlen_q_; ++i) {
    const int64_t begin = row_ptr_[static_cast<size_t>(i)];
    const int64_t end = row_ptr_[static_cast<size_t>(i + 1)];
    if (begin < end) ++nonempty_rows_;
    for (int64_t p = begin; p < end; ++p) {
      const auto slot =
          static_cast<size_t>(fill[static_cast<size_t>(col_idx_[static_cast<size_t>(p)])]++);
      row_idx_[slot] = i;
      csr_position_[slot] = p;
    }
  }
  for (int64_t j = 0; j < seqlen_k_; ++j) {
    if (col_ptr_[static_cast<size_t>(j)] < col_ptr_[static_cast<size_t>(j + 1)]) ++nonempty_cols_;
  }
}

namespace {

// Sum over blocks of `block` consecutive rows of a compressed structure of the distinct indices
// their entries hold. last[c] = the last block that counted index c.
int64_t touched_per_block(const IndexArray& ptr, const IndexArray& idx,
                          int64_t num_cols, int64_t block) {
  const int64_t num_rows = static_cast<int64_t>(ptr.size()) - 1;
  std::vector<int64_t> last(static_cast<size_t>(num_cols), -1);
  int64_t touched = 0;
  for (int64_t row0 = 0, b = 0; row0 < num_rows; row0 += block, ++b) {
    const int64_t end = ptr[static_cast<size_t>(std::min(row0 + block, num_rows))];
    for (int64_t p = ptr[static_cast<size_t>(row0)]; p < end; ++p) {
      int64_t& seen = last[static_cast<size_t>(idx[static_cast<size_t>(p)])];
      if (seen != b) {
        seen = b;
        ++touched;
      }
    }
  }
  return touched;
}

}  // namespace

int64_t SparseSmallCacheMask::touched_keys(int64_t block_rows) const {
  return touched_per_block(row_ptr_, col_idx_, seqlen_k_, std::max<int64_t>(block_rows, 1));
}

int64_t SparseSmallCacheMask::touched_queries(int64_t block_cols) const {
  return touched_per_block(col_ptr_, row_idx_, seqlen_q_, std::max<int64_t>(block_cols, 1));
}

// ---- sweeps -------------------------------------------------------------------------------------

namespace sparse_small_cache_detail {

SweepTraits sweep_traits(Sweep sweep) {
  switch (sweep) {
    case Sweep::scores: return {true, false, 2, 1};    // row max, row sum | S
    case Sweep::output: return {false, false, 1, 1};   // LSE | S
    case Sweep::probs: return {true, false, 1, 1};     // LSE | P
    case Sweep::d_scores: return {true, false, 1, 2};  // D | dS, P
    case Sweep::dq: return {false, false, 0, 1};       // | dS
    case Sweep::dk: return {false, true, 0, 1};        // | positions (dS gathered)
    case Sweep::dv: return {false, true, 0, 1};        // | positions (P gathered)
  }
  return {};
}

int64_t run_words_per_row(const SweepTraits& traits, int64_t run) {
  return traits.transposed ? 2 * index_run(run) : traits.entry_runs * run + index_run(run);
}

int64_t sweep_fast_words(Sweep sweep, const SparseSweepTiles& tiles) {
  const SweepTraits traits = sweep_traits(sweep);
  const int64_t runs = tiles.run == 1 ? traits.entry_runs : tiles.block_rows * run_words_per_row(traits, tiles.run);
  return tiles.block_rows * (tiles.chunk + kRowIndexWords + traits.row_words) + 1 +
         tiles.block_cols * (tiles.chunk + 1) + runs + (traits.transposed ? gather_words(tiles.run) : 0);
}

// The counts of a prepared mask, over its own CSR copy (O(nnz)).
SparseMaskCounts counts_of(const SparseSmallCacheMask& mask) {
  return SparseMaskCounts(sparse_formats::CsrPatternView<int64_t>{
      mask.seqlen_q(), mask.seqlen_k(), mask.row_ptr().data(), mask.col_idx().data()});
}

int64_t sweep_width(Sweep sweep, const HeadShape& shape) {
  switch (sweep) {
    case Sweep::output:
    case Sweep::d_scores:
    case Sweep::dv: return shape.head_dim_v;
    default: return shape.head_dim;
  }
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

// The chunks of a sweep with these tiles (sweep_chunk_count, as the runs stream them).
int64_t sweep_chunks(Sweep sweep, const HeadShape& shape, const SparseSweepTiles& tiles) {
  return sweep_chunk_count(sweep_traits(sweep).sddmm, sweep_width(sweep, shape), tiles.chunk);
}

// The words of one sweep, given `touched` = the sum over its row blocks of the distinct B rows
// they touch (docs/sparse_small_cache.md, "Exact words").
SparseIo sweep_io(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                  const SparseSweepTiles& tiles, int64_t touched) {
  const SweepTraits traits = sweep_traits(sweep);
  const int64_t w = sweep_width(sweep, shape);
  const int64_t rows = traits.transposed ? mask.seqlen_k() : mask.seqlen_q();
  const int64_t nonempty = traits.transposed ? mask.nonempty_cols() : mask.nonempty_rows();
  const int64_t nnz = mask.nnz();
  const int64_t blocks = ceil_div(rows, tiles.block_rows);
  SparseIo io;
  const int64_t chunks = sweep_chunks(sweep, shape, tiles);
  if (traits.sddmm) {
    io.indices.reads = rows + blocks + chunks * nnz;  // row pointers; a column word per entry
    io.values.reads = nonempty * w + touched * w + (chunks - 1) * nnz;  // A, B, partial sums
    io.values.writes = chunks * nnz;                         // partial sums, then the result
    if (sweep == Sweep::scores) io.values.writes += rows;    // LSE
    if (sweep == Sweep::probs) io.values.reads += nonempty;  // LSE
    if (sweep == Sweep::d_scores) io.values.reads += nonempty * w + nnz;  // O rows (for D); P
    return io;
  }
  if (chunks == 0) return io;
  // Per chunk and entry: its column (and, transposed, its CSR position) and its value (transposed:
  // the pieces gathered, nnz words with run = 1).
  io.indices.reads = rows + blocks + chunks * nnz * (traits.transposed ? 2 : 1);
  io.values.reads = chunks * (traits.transposed ? mask.gathers(tiles.block_rows, tiles.run).words : nnz) +
                    touched * w;
  if (sweep == Sweep::output) io.values.reads += nonempty;  // LSE
  io.values.writes = rows * w;
  return io;
}

// touched for a sweep's row blocks (SparseMaskCounts remembers each block size's count).
int64_t touched_of(const SparseMaskCounts& mask, bool transposed, int64_t block_rows) {
  return transposed ? mask.touched_queries(block_rows) : mask.touched_keys(block_rows);
}

// One sweep's walk steps with these tiles (SparseSmallCacheWork::walk_steps), from per-block
// averages: each block's entries, and its touched columns taken as spread over all the columns
// (a window opens at a touched column and covers block_cols: about t / (1 + (block_cols - 1) t /
// cols) windows for t touched; an overestimate where they are contiguous, as on a band).
int64_t sweep_walk_steps(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                         const SparseSweepTiles& tiles, int64_t touched) {
  const SweepTraits traits = sweep_traits(sweep);
  const int64_t chunks = sweep_chunks(sweep, shape, tiles);
  if (mask.nnz() == 0 || chunks == 0) return 0;
  const int64_t rows = traits.transposed ? mask.seqlen_k() : mask.seqlen_q();
  const int64_t cols = std::max<int64_t>(traits.transposed ? mask.seqlen_q() : mask.seqlen_k(), 1);
  const int64_t blocks = ceil_div(rows, tiles.block_rows);
  const int64_t block_rows = std::min(tiles.block_rows, rows);
  const double entries = static_cast<double>(mask.nnz()) / static_cast<double>(blocks);
  const double columns = static_cast<double>(touched) / static_cast<double>(blocks);
  const double spread = 1.0 + static_cast<double>(tiles.block_cols - 1) * columns / static_cast<double>(cols);
  const auto windows = static_cast<int64_t>(std::ceil(columns / spread));
  const int64_t row_visits = std::min(static_cast<int64_t>(entries), block_rows * windows);
  const int64_t per_walk = std::min(scan_steps(block_rows, windows), queue_steps(block_rows, row_visits));
  return chunks * blocks * per_walk;
}

// One sweep's entry visits: every entry once per chunk.
int64_t sweep_entry_visits(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                           const SparseSweepTiles& tiles) {
  return sweep_chunks(sweep, shape, tiles) * mask.nnz();
}

void check_shape(const char* where, const HeadShape& shape) {
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail(where, ": sizes must be non-negative, got seqlen_q ", shape.seqlen_q, ", seqlen_k ",
         shape.seqlen_k, ", head_dim ", shape.head_dim, ", head_dim_v ", shape.head_dim_v);
  }
}


constexpr Sweep kForwardSweeps[] = {Sweep::scores, Sweep::output};
constexpr Sweep kBackwardSweeps[] = {Sweep::probs, Sweep::d_scores, Sweep::dq, Sweep::dk,
                                     Sweep::dv};

SweepList sweeps_of(Pass pass) {
  return pass == Pass::forward ? SweepList{std::begin(kForwardSweeps), std::end(kForwardSweeps)}
                               : SweepList{std::begin(kBackwardSweeps), std::end(kBackwardSweeps)};
}

const SparseSweepTiles& tiles_of(const SparseSmallCacheTiles& tiles, Sweep sweep) {
  switch (sweep) {
    case Sweep::scores: return tiles.scores;
    case Sweep::output: return tiles.output;
    case Sweep::probs: return tiles.probs;
    case Sweep::d_scores: return tiles.d_scores;
    case Sweep::dq: return tiles.dq;
    case Sweep::dk: return tiles.dk;
    case Sweep::dv: return tiles.dv;
  }
  return tiles.scores;
}

SparseSweepTiles& tiles_of(SparseSmallCacheTiles& tiles, Sweep sweep) {
  switch (sweep) {
    case Sweep::scores: return tiles.scores;
    case Sweep::output: return tiles.output;
    case Sweep::probs: return tiles.probs;
    case Sweep::d_scores: return tiles.d_scores;
    case Sweep::dq: return tiles.dq;
    case Sweep::dk: return tiles.dk;
    case Sweep::dv: return tiles.dv;
  }
  return tiles.scores;
}

SparseIo predict_sweeps(const HeadShape& shape, const SparseMaskCounts& mask, const SparseSmallCacheTiles& tiles) {
  SparseIo io;
  for (Sweep sweep : sweeps_of(tiles.pass)) io += predict_sweep(sweep, shape, mask, tiles_of(tiles, sweep));
  return io;
}


SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseSmallCacheMask& mask,
                       const SparseSweepTiles& tiles) {
  return predict_sweep(sweep, shape, counts_of(mask), tiles);
}

SparseIo predict_sweep(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                       const SparseSweepTiles& tiles) {
  return sweep_io(sweep, shape, mask, tiles, touched_of(mask, sweep_traits(sweep).transposed, tiles.block_rows));
}

namespace {

// The tiles were chosen for this pass, shape and mask: the plan hands them out with the mask's
// prepared structure (plan/planned_run.hpp), so a mismatch is a bug in the caller, not bad input.
template <typename MaskLike>
void check_tiles_of([[maybe_unused]] const char* where, [[maybe_unused]] const HeadShape& shape,
                    [[maybe_unused]] const MaskLike& mask, [[maybe_unused]] const SparseSmallCacheTiles& tiles,
                    [[maybe_unused]] Pass pass) {
  assert(tiles.pass == pass && "sparse small_cache tiles chosen for the other pass");
  [[maybe_unused]] const HeadShape& t = tiles.shape;
  assert(t.seqlen_q == shape.seqlen_q && t.seqlen_k == shape.seqlen_k && t.head_dim == shape.head_dim &&
         t.head_dim_v == shape.head_dim_v && "sparse small_cache tiles chosen for another shape");
  assert(mask.seqlen_q() == shape.seqlen_q && mask.seqlen_k() == shape.seqlen_k && "mask of another shape");
  assert(tiles.nnz == mask.nnz() && "sparse small_cache tiles chosen for another mask");
  for ([[maybe_unused]] Sweep sweep : sweeps_of(pass)) {
    assert(tiles_of(tiles, sweep).block_rows >= 1 && tiles_of(tiles, sweep).block_cols >= 1 &&
           tiles_of(tiles, sweep).chunk >= 1 && tiles_of(tiles, sweep).run >= 1 &&
           "sparse small_cache tiles below 1");
    assert((tiles_of(tiles, sweep).run & (tiles_of(tiles, sweep).run - 1)) == 0 && "runs are powers of two");
    assert((!sweep_traits(sweep).transposed || tiles_of(tiles, sweep).run == 1 ||
            tiles_of(tiles, sweep).block_cols == 1) &&
           "a transposed sweep with runs has 1-column windows (it gathers in CSR order)");
  }
}

}  // namespace

void check_tiles(const char* where, const HeadShape& shape, const SparseSmallCacheMask& mask,
                 const SparseSmallCacheTiles& tiles, Pass pass) {
  check_tiles_of(where, shape, mask, tiles, pass);
}

void check_room(const char* where, const io::FastMemory& fast, const SparseSmallCacheTiles& tiles) {
  const int64_t needed = sparse_small_cache_fast_words(tiles);
  const int64_t free_words = fast.capacity() - fast.resident();
  if (needed > free_words) {
    std::ostringstream message;
    message << where << ": the tiles need " << needed << " words of fast memory, " << free_words
            << " of M = " << fast.capacity()
            << " are free (tiles chosen for M = " << tiles.cache_words << ")";
    throw RuntimeError(message.str());
  }
}

}  // namespace sparse_small_cache_detail

using namespace sparse_small_cache_detail;

// ---- the public functions -----------------------------------------------------------------------

int64_t sparse_small_cache_min_cache_words(Pass pass) {
  const SparseSweepTiles ones;
  int64_t words = 0;
  for (Sweep sweep : sweeps_of(pass)) words = std::max(words, sweep_fast_words(sweep, ones));
  return words;
}

SparseSmallCacheWork estimate_sparse_small_cache_work(const HeadShape& shape, const SparseMaskCounts& mask,
                                                      const SparseSmallCacheTiles& tiles) {
  check_tiles_of("estimate_sparse_small_cache_work", shape, mask, tiles, tiles.pass);
  SparseSmallCacheWork work;
  for (Sweep sweep : sweeps_of(tiles.pass)) {
    const SparseSweepTiles& t = tiles_of(tiles, sweep);
    work.entry_visits += sweep_entry_visits(sweep, shape, mask, t);
    work.walk_steps +=
        sweep_walk_steps(sweep, shape, mask, t, touched_of(mask, sweep_traits(sweep).transposed, t.block_rows));
  }
  work.flops = small_cache_flops(shape, mask.nnz(), tiles.pass);
  return work;
}

int64_t sparse_small_cache_fast_words(const SparseSmallCacheTiles& tiles) {
  int64_t words = 0;
  for (Sweep sweep : sweeps_of(tiles.pass)) {
    // An SpMM with nothing to compute (width 0) allocates nothing.
    if (sweep_traits(sweep).sddmm || sweep_width(sweep, tiles.shape) > 0) {
      words = std::max(words, sweep_fast_words(sweep, tiles_of(tiles, sweep)));
    }
  }
  return words;
}

SparseIo predict_sparse_small_cache_forward(const HeadShape& shape,
                                            const SparseSmallCacheMask& mask,
                                            const SparseSmallCacheTiles& tiles) {
  check_tiles("predict_sparse_small_cache_forward", shape, mask, tiles, Pass::forward);
  return predict_sweeps(shape, counts_of(mask), tiles);
}

SparseIo predict_sparse_small_cache_backward(const HeadShape& shape,
                                             const SparseSmallCacheMask& mask,
                                             const SparseSmallCacheTiles& tiles) {
  check_tiles("predict_sparse_small_cache_backward", shape, mask, tiles, Pass::backward);
  return predict_sweeps(shape, counts_of(mask), tiles);
}

SparseIo predict_sparse_small_cache_forward(const HeadShape& shape, const SparseMaskCounts& mask,
                                            const SparseSmallCacheTiles& tiles) {
  check_tiles_of("predict_sparse_small_cache_forward", shape, mask, tiles, Pass::forward);
  return predict_sweeps(shape, mask, tiles);
}

SparseIo predict_sparse_small_cache_backward(const HeadShape& shape, const SparseMaskCounts& mask,
                                             const SparseSmallCacheTiles& tiles) {
  check_tiles_of("predict_sparse_small_cache_backward", shape, mask, tiles, Pass::backward);
  return predict_sweeps(shape, mask, tiles);
}

}  // namespace spattn::schedules
