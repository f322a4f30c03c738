// io.hpp's line rule for the layout every line prediction assumes: each operand a dense row-major
// array of its head (row stride = its width, contiguous (batch, heads, seqlen, head_dim) tensors),
// or a transposed view of one. One place, so the predictions cannot drift from the rule.
#pragma once

#include <spattn/io.hpp>

#include <cstdint>

namespace spattn::schedules {

// Lines of a move of rows [row0, row0 + rows) of a rows-by-`width` row-major array (all columns).
inline int64_t dense_rows_lines(int64_t row0, int64_t rows, int64_t width, int64_t line_words) {
  return io::tile_lines(width, 1, width, row0, 0, rows, width, line_words);
}

// Lines of moving every tile of the grid of tile_rows x tile_cols tiles over a rows x cols view:
// of a row-major array, or (transposed) of the transposed view of a row-major (cols, rows) array.
inline int64_t dense_grid_lines(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols,
                                int64_t line_words, bool transposed = false) {
  return io::grid_lines(transposed ? 1 : cols, transposed ? rows : 1, rows, cols, tile_rows, tile_cols,
                        line_words);
}

}  // namespace spattn::schedules
