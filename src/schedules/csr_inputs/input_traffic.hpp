// Exact reads of the input operands Q, K, V by each schedule, for dense or CSR inputs
// (docs/sparse.md, "Sparse inputs"). Each function mirrors its schedule's loads of Q, K and V tile
// by tile (which tiles, how often, in which orientation) and prices every load with the CSR
// counting rule of io.hpp (io::csr_tile_words) or, for a dense operand, rows x cols value words.
// They walk the tile lists and the CSR index arrays; they never run a schedule.
//
// The schedules' own predictions (flash.hpp, small_cache.hpp, sparse_small_cache.hpp) assume dense
// inputs. With_inputs() turns one into the exact prediction for these inputs: the dense inputs'
// reads out, these inputs' value and index reads in; nothing else a schedule moves depends on
// whether its inputs are sparse (the fast buffers and the arithmetic are the same).
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/common/head_problem.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/io.hpp>

#include <cstdint>

namespace spattn::schedules {

// One input (Q, K or V of one head, seqlen x head_dim) as the predictions see it, its lines counted
// in lines of `line_words` words (the plan's line size).
class InputOperand {
 public:
  InputOperand() = default;
  static InputOperand dense(int64_t rows, int64_t cols, int64_t line_words);
  static InputOperand csr(const SlowMatrix<const float>::Csr& matrix, int64_t line_words);
  // Dense or CSR as the view is (the view's orientation is ignored: tiles are stored tiles).
  static InputOperand of(const SlowMatrix<const float>& view, int64_t line_words);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool is_csr() const { return is_csr_; }
  int64_t line_words() const { return line_words_; }
  // The words one load of stored rows [row0, row0 + rows) x columns [col0, col0 + cols) moves.
  // `continued`: the load continues the one before along the stored rows with the line they share
  // carried (io::continued_tile_lines; a CSR load has no carry).
  io::CsrTileWords tile(int64_t row0, int64_t rows, int64_t col0, int64_t cols, bool continued = false) const;

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t line_words_ = io::kDefaultLineWords;
  bool is_csr_ = false;
  SlowMatrix<const float>::Csr csr_;
};

struct HeadInputs {
  InputOperand q;  // (seqlen_q, head_dim)
  InputOperand k;  // (seqlen_k, head_dim)
  InputOperand v;  // (seqlen_k, head_dim_v)
  static HeadInputs dense(const HeadShape& shape, int64_t line_words);
  template <typename Problem>  // HeadForward or HeadBackward
  static HeadInputs of(const Problem& problem, int64_t line_words) {
    return {InputOperand::of(problem.q, line_words), InputOperand::of(problem.k, line_words),
            InputOperand::of(problem.v, line_words)};
  }
  int64_t line_words() const { return q.line_words(); }
};

// Reads of each input, value and index words.
struct InputTraffic {
  io::CsrTileWords q, k, v;
  io::CsrTileWords total() const {
    io::CsrTileWords sum = q;
    sum += k;
    sum += v;
    return sum;
  }
};

// The schedules' loads of Q, K, V (mask == nullptr: dense flash).
InputTraffic flash_forward_inputs(const HeadShape& shape, const FlashTiles& tiles,
                                  const FlashMask* mask, const HeadInputs& inputs);
InputTraffic flash_backward_inputs(const HeadShape& shape, const FlashTiles& tiles,
                                   const FlashMask* mask, const HeadInputs& inputs);
InputTraffic small_cache_forward_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                        const HeadInputs& inputs);
InputTraffic small_cache_backward_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                         const HeadInputs& inputs);
InputTraffic sparse_small_cache_forward_inputs(const HeadShape& shape,
                                               const SparseSmallCacheMask& mask,
                                               const SparseSmallCacheTiles& tiles,
                                               const HeadInputs& inputs);
InputTraffic sparse_small_cache_backward_inputs(const HeadShape& shape,
                                                const SparseSmallCacheMask& mask,
                                                const SparseSmallCacheTiles& tiles,
                                                const HeadInputs& inputs);

// A prediction in words and in lines of the inputs' line size (InputOperand::line_words), values
// and indices apart.
struct InputIo {
  SparseIo words;
  SparseIo lines;
};

// A dense-input prediction turned into the prediction for inputs whose reads are `inputs`, given
// the dense inputs' reads `dense` of the same schedule and tiles: the dense inputs' reads out,
// these inputs' in, in words and in lines (the inputs are walked once for both).
inline InputIo with_inputs(InputIo prediction, const InputTraffic& dense, const InputTraffic& inputs) {
  const io::CsrTileWords in = inputs.total(), out = dense.total();
  prediction.words.values.reads += in.values - out.values;
  prediction.words.indices.reads += in.indices - out.indices;
  prediction.lines.values.reads += in.value_lines - out.value_lines;
  prediction.lines.indices.reads += in.index_lines - out.index_lines;
  return prediction;
}

// Every schedule's exact words and lines with these inputs: its own dense-input predictions
// through with_inputs. mask == nullptr for flash is dense flash.
InputIo predict_flash_with_inputs(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                  Pass pass, const HeadInputs& inputs);
InputIo predict_small_cache_with_inputs(const HeadShape& shape, const SmallCacheTiles& tiles,
                                        const HeadInputs& inputs);
InputIo predict_sparse_small_cache_with_inputs(const HeadShape& shape, const SparseSmallCacheMask& mask,
                                               const SparseSmallCacheTiles& tiles, const HeadInputs& inputs);

}  // namespace spattn::schedules
