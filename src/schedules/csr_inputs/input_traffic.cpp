// The input operands' reads by the flash and small_cache schedules (input_traffic.hpp): each
// function mirrors its schedule's loads of Q, K and V. The density-adaptive schedule's are in
// input_traffic_sweeps.cpp.
#include "schedules/csr_inputs/input_traffic.hpp"

#include "schedules/flash/flash_mask.hpp"
#include "schedules/csr_inputs/input_traffic_sum.hpp"

#include <algorithm>
#include <vector>

namespace spattn::schedules {

using flash_detail::num_tiles;
using flash_detail::tile_rows;
using io::CsrTileWords;

// ---- the operands -------------------------------------------------------------------------------

InputOperand InputOperand::dense(int64_t rows, int64_t cols, int64_t line_words) {
  io::check_line_words("InputOperand", line_words);
  InputOperand op;
  op.rows_ = rows;
  op.cols_ = cols;
  op.line_words_ = line_words;
  return op;
}

InputOperand InputOperand::csr(const SlowMatrix<const float>::Csr& matrix, int64_t line_words) {
  InputOperand op = dense(matrix.num_rows(), matrix.num_cols(), line_words);
  op.is_csr_ = true;
  op.csr_ = matrix;
  return op;
}

InputOperand InputOperand::of(const SlowMatrix<const float>& view, int64_t line_words) {
  if (view.is_csr()) return csr(view.csr_matrix(), line_words);
  return dense(view.rows(), view.cols(), line_words);
}

CsrTileWords InputOperand::tile(int64_t row0, int64_t rows, int64_t col0, int64_t cols, bool continued) const {
  if (is_csr_) return io::csr_tile_words(csr_, row0, rows, col0, cols, line_words_);
  CsrTileWords words;
  words.values = rows * cols;  // a dense tile: every word a value
  // A dense operand is a row-major array of its head (schedules/common/dense_lines.hpp's layout).
  const int64_t line = line_words_;
  words.value_lines = continued ? io::continued_tile_lines(cols_, 1, cols_, row0, col0, rows, cols, line)
                                : io::tile_lines(cols_, 1, cols_, row0, col0, rows, cols, line);
  return words;
}

HeadInputs HeadInputs::dense(const HeadShape& shape, int64_t line_words) {
  return {InputOperand::dense(shape.seqlen_q, shape.head_dim, line_words),
          InputOperand::dense(shape.seqlen_k, shape.head_dim, line_words),
          InputOperand::dense(shape.seqlen_k, shape.head_dim_v, line_words)};
}

namespace {

// ---- flash --------------------------------------------------------------------------------------

// Full-width tiles of `block` stored rows of an operand, as the given field of InputTraffic.
std::vector<InputTraffic> row_tiles(const InputOperand& op, int64_t block,
                                    io::CsrTileWords InputTraffic::*field) {
  std::vector<InputTraffic> tiles(static_cast<size_t>(num_tiles(op.rows(), block)));
  for (size_t t = 0; t < tiles.size(); ++t) {
    const auto tile = static_cast<int64_t>(t);
    tiles[t].*field = op.tile(tile * block, tile_rows(op.rows(), block, tile), 0, op.cols());
  }
  return tiles;
}

// Adds b's k and v (or q) tiles to a: two operands sharing a tiling.
std::vector<InputTraffic> merged(std::vector<InputTraffic> a, const std::vector<InputTraffic>& b) {
  for (size_t t = 0; t < a.size(); ++t) a[t] += b[t];
  return a;
}

// One flash loop nest: outer[i] is loaded once per outer tile whose list is not empty, inner[j]
// once per visit (flash.hpp). lists == nullptr: dense, every outer tile visits every inner tile.
InputTraffic nest(const FlashTileLists* lists, const std::vector<InputTraffic>& outer,
                  const std::vector<InputTraffic>& inner) {
  InputTraffic sum;
  if (lists == nullptr) {
    if (inner.empty()) return sum;  // no inner tile: the outer tiles are never loaded
    InputTraffic all_inner;
    for (const InputTraffic& t : inner) all_inner += t;
    for (const InputTraffic& t : outer) sum += t;
    sum += scaled(all_inner, static_cast<int64_t>(outer.size()));
    return sum;
  }
  for (size_t i = 0; i < outer.size(); ++i) {
    if (lists->run_ptr[i] == lists->run_ptr[i + 1]) continue;
    sum += outer[i];
    lists->for_each_tile(static_cast<int64_t>(i), [&](int64_t tile, bool) { sum += inner[static_cast<size_t>(tile)]; });
  }
  return sum;
}

// ---- small_cache --------------------------------------------------------------------------------

// The words of a chunk of a product operand op(X) at view coordinates (row0, rows, col0, cols):
// when X is an input, the stored tile it covers (transposed: op(X) = X^T, so view rows are X's
// columns), booked to `field`; nothing otherwise.
struct ProductOperand {
  const InputOperand* input = nullptr;
  io::CsrTileWords InputTraffic::*field = nullptr;
  bool transposed = false;
  // `continued`: a chunk of k after the first, with the tiles' line carry (tiled_matmul.hpp).
  InputTraffic operator()(int64_t row0, int64_t rows, int64_t col0, int64_t cols, bool continued = false) const {
    InputTraffic words;
    if (input != nullptr) {
      words.*field = transposed ? input->tile(col0, cols, row0, rows, continued)
                                : input->tile(row0, rows, col0, cols, continued);
    }
    return words;
  }
};

// tiled_matmul's loads of op(A) (a x k) and op(B) (k x b) (tiled_matmul.hpp): each A chunk per row
// block and k chunk, once when the chunk covers k (the panel is kept) or else per column block;
// each B chunk per column block and k chunk, once per row block; chunks after the first continued
// where the tiles carry that operand's lines.
InputTraffic matmul_inputs(int64_t a, int64_t k, int64_t b, const MatmulTiles& tiles, const ProductOperand& op_a,
                           const ProductOperand& op_b) {
  InputTraffic sum;
  const int64_t row_blocks = num_tiles(a, tiles.tile_m);
  const int64_t col_blocks = num_tiles(b, tiles.tile_n);
  if (row_blocks == 0 || col_blocks == 0) return sum;  // nothing is loaded
  for (int64_t row0 = 0; row0 < a; row0 += tiles.tile_m) {
    for (int64_t k0 = 0; k0 < k; k0 += tiles.tile_k) {
      sum += scaled(op_a(row0, std::min(tiles.tile_m, a - row0), k0, std::min(tiles.tile_k, k - k0),
                         tiles.carry_a && k0 > 0),
                    tiles.tile_k >= k ? 1 : col_blocks);
    }
  }
  for (int64_t col0 = 0; col0 < b; col0 += tiles.tile_n) {
    for (int64_t k0 = 0; k0 < k; k0 += tiles.tile_k) {
      sum += scaled(op_b(k0, std::min(tiles.tile_k, k - k0), col0, std::min(tiles.tile_n, b - col0),
                         tiles.carry_b && k0 > 0),
                    row_blocks);
    }
  }
  return sum;
}

// S (forward) or P (backward) = scale Q K^T: A = Q, B = K^T.
InputTraffic scores_inputs(const HeadShape& shape, const MatmulTiles& tiles, const HeadInputs& in) {
  return matmul_inputs(shape.seqlen_q, shape.head_dim, shape.seqlen_k, tiles, {&in.q, &InputTraffic::q},
                       {&in.k, &InputTraffic::k, true});
}

// The forward's and the backward dQ pass's nest: per query tile (block_q rows) Q^T once, per
// visited key tile (block_k rows) K and V.
InputTraffic query_tile_nest(const FlashMask* mask, int64_t block_q, int64_t block_k, const HeadInputs& in) {
  return nest(mask != nullptr ? &mask->query_rows : nullptr, row_tiles(in.q, block_q, &InputTraffic::q),
              merged(row_tiles(in.k, block_k, &InputTraffic::k), row_tiles(in.v, block_k, &InputTraffic::v)));
}

}  // namespace

InputTraffic flash_forward_inputs(const HeadShape& shape, const FlashTiles& tiles,
                                  const FlashMask* mask, const HeadInputs& in) {
  flash_detail::check_tiles(tiles, Pass::forward, "flash_forward_inputs");
  flash_detail::check_mask("flash_forward_inputs", mask, shape, tiles, Pass::forward);
  return query_tile_nest(mask, tiles.block_q, tiles.block_k, in);
}

InputTraffic flash_backward_inputs(const HeadShape& shape, const FlashTiles& tiles,
                                   const FlashMask* mask, const HeadInputs& in) {
  flash_detail::check_tiles(tiles, Pass::backward, "flash_backward_inputs");
  flash_detail::check_mask("flash_backward_inputs", mask, shape, tiles, Pass::backward);
  // dK/dV pass: per key tile K^T and V^T once, per visited query tile Q.
  InputTraffic sum = nest(mask != nullptr ? &mask->key_cols : nullptr,
                          merged(row_tiles(in.k, tiles.dkdv_block_k, &InputTraffic::k),
                                 row_tiles(in.v, tiles.dkdv_block_k, &InputTraffic::v)),
                          row_tiles(in.q, tiles.dkdv_block_q, &InputTraffic::q));
  // dQ pass (the D pre-pass reads no input; with dQ in the dK/dV pass there is none).
  if (!tiles.dq_in_dkdv) sum += query_tile_nest(mask, tiles.block_q, tiles.block_k, in);
  return sum;
}

InputTraffic small_cache_forward_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                        const HeadInputs& in) {
  small_cache_detail::check_tiles("small_cache_forward_inputs", shape, tiles, Pass::forward);
  // S = scale Q K^T; O = exp(S - LSE) V: B = V.
  InputTraffic sum = scores_inputs(shape, tiles.scores, in);
  sum += matmul_inputs(shape.seqlen_q, shape.seqlen_k, shape.head_dim_v, tiles.output, {}, {&in.v, &InputTraffic::v});
  return sum;
}

InputTraffic small_cache_backward_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                         const HeadInputs& in) {
  small_cache_detail::check_tiles("small_cache_backward_inputs", shape, tiles, Pass::backward);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  // P = exp(scale Q K^T - LSE); dS from dP = dO V^T: B = V^T; dQ = scale dS K: B = K;
  // dK = scale dS^T Q: B = Q; dV = P^T dO reads no input.
  InputTraffic sum = scores_inputs(shape, tiles.scores, in);
  sum += matmul_inputs(m, e, n, tiles.d_scores, {}, {&in.v, &InputTraffic::v, true});
  sum += matmul_inputs(m, n, d, tiles.dq, {}, {&in.k, &InputTraffic::k});
  sum += matmul_inputs(n, m, d, tiles.dk, {}, {&in.q, &InputTraffic::q});
  return sum;
}

// ---- the predictions with these inputs ---------------------------------------------------------

namespace {
SparseIo as_sparse_io(const FlashWords& words) { return {words.values, words.indices}; }
}  // namespace

InputIo predict_flash_with_inputs(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                  Pass pass, const HeadInputs& inputs) {
  const bool forward = pass == Pass::forward;
  const int64_t line = inputs.line_words();
  const InputIo prediction{
      as_sparse_io(forward ? predict_flash_forward_words(shape, tiles, mask)
                           : predict_flash_backward_words(shape, tiles, mask)),
      as_sparse_io(forward ? predict_flash_forward_lines(shape, tiles, mask, line)
                           : predict_flash_backward_lines(shape, tiles, mask, line))};
  const auto reads = [&](const HeadInputs& in) {
    return forward ? flash_forward_inputs(shape, tiles, mask, in) : flash_backward_inputs(shape, tiles, mask, in);
  };
  return with_inputs(prediction, reads(HeadInputs::dense(shape, inputs.line_words())), reads(inputs));
}

InputIo predict_small_cache_with_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                        const HeadInputs& inputs) {
  const bool forward = tiles.pass == Pass::forward;
  const int64_t line = inputs.line_words();
  const InputIo prediction{
      {forward ? predict_small_cache_forward(shape, tiles) : predict_small_cache_backward(shape, tiles), {}},
      {forward ? predict_small_cache_forward_lines(shape, tiles, line)
               : predict_small_cache_backward_lines(shape, tiles, line),
       {}}};
  const auto reads = [&](const HeadInputs& in) {
    return forward ? small_cache_forward_inputs(shape, tiles, in) : small_cache_backward_inputs(shape, tiles, in);
  };
  return with_inputs(prediction, reads(HeadInputs::dense(shape, inputs.line_words())), reads(inputs));
}

}  // namespace spattn::schedules
