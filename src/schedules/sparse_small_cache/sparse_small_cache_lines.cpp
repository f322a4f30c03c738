// The density-adaptive small_cache's exact lines (sparse_small_cache.hpp; io.hpp's line rule;
// docs/sparse_small_cache.md, "Exact lines"): each move of the sweeps, counted as the ledger counts
// it, summed in closed form over the row blocks and chunks.
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include "schedules/common/dense_lines.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache_sweeps.hpp"

#include <spattn/error.hpp>
#include <spattn/io.hpp>

namespace spattn::schedules {

namespace sparse_small_cache_detail {

namespace {

// The lines of one run of `extra` + block words per row block of a vector of `rows` words (row
// pointers: extra = 1; LSE: 0), summed over the blocks.
int64_t block_vector_lines(int64_t rows, int64_t block_rows, int64_t extra, int64_t line_words) {
  int64_t lines = 0;
  for (int64_t row0 = 0; row0 < rows; row0 += block_rows) {
    lines += io::segment_lines(row0, std::min(block_rows, rows - row0) + extra, line_words);
  }
  return lines;
}

}  // namespace

// Per chunk, a run of entries moves inside one line (run divides L), so every move of a run costs
// one line: the values and P (runs of `run`), the column indices and the positions (transposed;
// runs of index_run(run)). Dense rows (A panel,
// B rows, O rows for D) and the output's block x chunk tiles cost what dense_lines.hpp says; the
// row pointers and LSE their vector runs per block; a row's LSE word one line, and a gathered
// value, or with runs a gathered piece, one line.
SparseIo sweep_lines(Sweep sweep, const HeadShape& shape, const SparseMaskCounts& mask,
                     const SparseSweepTiles& tiles, int64_t touched, int64_t line_words) {
  io::check_line_words("sparse_small_cache lines", line_words);
  if (line_words % tiles.run != 0) {
    fail("sparse_small_cache lines: runs of ", tiles.run, " entries do not divide lines of ", line_words,
         " words (the tiles were chosen for another line size)");
  }
  const SweepTraits traits = sweep_traits(sweep);
  const int64_t w = sweep_width(sweep, shape);
  const int64_t rows = traits.transposed ? mask.seqlen_k() : mask.seqlen_q();
  const int64_t nonempty = traits.transposed ? mask.nonempty_cols() : mask.nonempty_rows();
  const int64_t chunks = sweep_chunk_count(traits.sddmm, w, tiles.chunk);
  // Per chunk: the value runs over the CSR (none transposed: it gathers) and the index runs of the
  // walked structure (column indices; transposed: row indices and positions).
  const int64_t runs = traits.transposed ? 0 : mask.entry_runs(tiles.run, false);
  const int64_t index_runs = mask.entry_runs(index_run(tiles.run), traits.transposed);
  // One dense row moved in all its chunks (A, B and O rows).
  const int64_t row_lines = dense_grid_lines(1, w, 1, tiles.chunk, line_words);
  const int64_t pointer_lines = block_vector_lines(rows, tiles.block_rows, 1, line_words);
  SparseIo lines;
  if (traits.sddmm) {
    lines.indices.reads = pointer_lines + chunks * index_runs;
    lines.values.reads = nonempty * row_lines + touched * row_lines + (chunks - 1) * runs;  // A, B, partials
    lines.values.writes = chunks * runs;
    if (sweep == Sweep::scores) lines.values.writes += block_vector_lines(rows, tiles.block_rows, 0, line_words);
    if (sweep == Sweep::probs) lines.values.reads += nonempty;                        // LSE words
    if (sweep == Sweep::d_scores) lines.values.reads += nonempty * row_lines + runs;  // O rows; P
    return lines;
  }
  if (chunks == 0) return lines;
  lines.indices.reads = pointer_lines + chunks * index_runs * (traits.transposed ? 2 : 1);
  lines.values.reads =
      chunks * (traits.transposed ? mask.gathers(tiles.block_rows, tiles.run).loads : runs) + touched * row_lines;
  if (sweep == Sweep::output) lines.values.reads += nonempty;  // LSE words
  lines.values.writes = dense_grid_lines(rows, w, tiles.block_rows, tiles.chunk, line_words);  // the output
  return lines;
}

}  // namespace sparse_small_cache_detail

using namespace sparse_small_cache_detail;

namespace {

SparseIo predict_lines(const char* where, const HeadShape& shape, const SparseMaskCounts& mask,
                       const SparseSmallCacheTiles& tiles, Pass pass) {
  check_shape(where, shape);
  check_mask(where, shape, mask);
  if (tiles.pass != pass || tiles.nnz != mask.nnz()) {
    fail(where, ": the tiles were chosen for another pass or mask");
  }
  SparseIo lines;
  for (Sweep sweep : sweeps_of(pass)) {
    const SparseSweepTiles& t = tiles_of(tiles, sweep);
    lines += sweep_lines(sweep, shape, mask, t, touched_of(mask, sweep_traits(sweep).transposed, t.block_rows),
                         tiles.line_words);
  }
  return lines;
}

}  // namespace

SparseIo predict_sparse_small_cache_forward_lines(const HeadShape& shape, const SparseMaskCounts& mask,
                                                  const SparseSmallCacheTiles& tiles) {
  return predict_lines("predict_sparse_small_cache_forward_lines", shape, mask, tiles, Pass::forward);
}

SparseIo predict_sparse_small_cache_backward_lines(const HeadShape& shape, const SparseMaskCounts& mask,
                                                   const SparseSmallCacheTiles& tiles) {
  return predict_lines("predict_sparse_small_cache_backward_lines", shape, mask, tiles, Pass::backward);
}

}  // namespace spattn::schedules
