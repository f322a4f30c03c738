// The input operands' reads by the density-adaptive small-cache schedule (input_traffic.hpp),
// mirroring its sweeps (sparse_small_cache_walk.hpp): an SDDMM loads the A row of each row with
// entries once per chunk of the dense width; every sweep loads, per row block and chunk, the B row
// of each distinct column the block's entries touch (the column windows of one walk are
// disjoint, so a column is loaded once per walk).
#include "schedules/csr_inputs/input_traffic.hpp"
#include "schedules/csr_inputs/input_traffic_sum.hpp"

#include <algorithm>
#include <vector>

namespace spattn::schedules {
namespace {

using io::CsrTileWords;

// Per stored row of `op`: the words of loading the row chunk by chunk (chunks of `chunk` columns
// over all op.cols(); the last may be short). A width of 0 loads nothing.
std::vector<CsrTileWords> row_chunk_words(const InputOperand& op, int64_t chunk) {
  std::vector<CsrTileWords> words(static_cast<size_t>(op.rows()));
  for (int64_t r = 0; r < op.rows(); ++r) {
    for (int64_t col0 = 0; col0 < op.cols(); col0 += chunk) {
      words[static_cast<size_t>(r)] += op.tile(r, 1, col0, std::min(chunk, op.cols() - col0));
    }
  }
  return words;
}

// Sum over blocks of `block` consecutive rows of the walked structure (ptr, idx) of words[j] for
// each distinct j their entries hold.
CsrTileWords touched_words(const IndexArray& ptr, const IndexArray& idx,
                           const std::vector<CsrTileWords>& words, int64_t block) {
  const int64_t num_rows = static_cast<int64_t>(ptr.size()) - 1;
  std::vector<int64_t> last(words.size(), -1);  // the last block that counted column j
  CsrTileWords sum;
  for (int64_t row0 = 0, b = 0; row0 < num_rows; row0 += block, ++b) {
    const int64_t end = ptr[static_cast<size_t>(std::min(row0 + block, num_rows))];
    for (int64_t p = ptr[static_cast<size_t>(row0)]; p < end; ++p) {
      const auto j = static_cast<size_t>(idx[static_cast<size_t>(p)]);
      if (last[j] != b) {
        last[j] = b;
        sum += words[j];
      }
    }
  }
  return sum;
}

// The A rows an SDDMM over the query rows loads: each row with entries, chunk by chunk.
CsrTileWords nonempty_rows_words(const SparseSmallCacheMask& mask, const InputOperand& op,
                                 int64_t chunk) {
  const std::vector<CsrTileWords> words = row_chunk_words(op, chunk);
  CsrTileWords sum;
  for (int64_t i = 0; i < mask.seqlen_q(); ++i) {
    if (mask.row_ptr()[static_cast<size_t>(i)] < mask.row_ptr()[static_cast<size_t>(i + 1)]) {
      sum += words[static_cast<size_t>(i)];
    }
  }
  return sum;
}

// B rows of a sweep over the query rows (B indexed by keys) or, transposed, over the keys.
CsrTileWords b_rows_words(const SparseSmallCacheMask& mask, bool transposed, const InputOperand& op,
                          const SparseSweepTiles& tiles) {
  const std::vector<CsrTileWords> words = row_chunk_words(op, tiles.chunk);
  return transposed ? touched_words(mask.col_ptr(), mask.row_idx(), words, tiles.block_rows)
                    : touched_words(mask.row_ptr(), mask.col_idx(), words, tiles.block_rows);
}

}  // namespace

InputTraffic sparse_small_cache_forward_inputs(const HeadShape& shape,
                                               const SparseSmallCacheMask& mask,
                                               const SparseSmallCacheTiles& tiles,
                                               const HeadInputs& in) {
  sparse_small_cache_detail::check_tiles("sparse_small_cache_forward_inputs", shape, mask, tiles,
                                         Pass::forward);
  InputTraffic sum;
  // S = scale Q K^T at the mask (SDDMM: A = Q, B = K); O = exp(S - LSE) V (SpMM: B = V).
  sum.q = nonempty_rows_words(mask, in.q, tiles.scores.chunk);
  sum.k = b_rows_words(mask, false, in.k, tiles.scores);
  sum.v = b_rows_words(mask, false, in.v, tiles.output);
  return sum;
}

InputTraffic sparse_small_cache_backward_inputs(const HeadShape& shape,
                                                const SparseSmallCacheMask& mask,
                                                const SparseSmallCacheTiles& tiles,
                                                const HeadInputs& in) {
  sparse_small_cache_detail::check_tiles("sparse_small_cache_backward_inputs", shape, mask, tiles,
                                         Pass::backward);
  InputTraffic sum;
  // P (SDDMM: A = Q, B = K); dS (SDDMM: A = dO, B = V); dQ (SpMM: B = K); dK (SpMM over the
  // keys: B = Q); dV (B = dO) reads no input.
  sum.q = nonempty_rows_words(mask, in.q, tiles.probs.chunk);
  sum.q += b_rows_words(mask, true, in.q, tiles.dk);
  sum.k = b_rows_words(mask, false, in.k, tiles.probs);
  sum.k += b_rows_words(mask, false, in.k, tiles.dq);
  sum.v = b_rows_words(mask, false, in.v, tiles.d_scores);
  return sum;
}

InputIo predict_sparse_small_cache_with_inputs(const HeadShape& shape, const SparseSmallCacheMask& mask,
                                               const SparseSmallCacheTiles& tiles, const HeadInputs& inputs) {
  const bool forward = tiles.pass == Pass::forward;
  const SparseMaskCounts counts = sparse_small_cache_detail::counts_of(mask);
  const InputIo prediction{forward ? predict_sparse_small_cache_forward(shape, mask, tiles)
                                   : predict_sparse_small_cache_backward(shape, mask, tiles),
                           forward ? predict_sparse_small_cache_forward_lines(shape, counts, tiles)
                                   : predict_sparse_small_cache_backward_lines(shape, counts, tiles)};
  const auto reads = [&](const HeadInputs& in) {
    return forward ? sparse_small_cache_forward_inputs(shape, mask, tiles, in)
                   : sparse_small_cache_backward_inputs(shape, mask, tiles, in);
  };
  return with_inputs(prediction, reads(HeadInputs::dense(shape, inputs.line_words())), reads(inputs));
}

}  // namespace spattn::schedules
