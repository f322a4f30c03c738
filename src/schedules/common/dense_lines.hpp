// io.hpp's line rule for the layout every line prediction assumes: each operand a dense row-major
// array of its head (row stride = its width, contiguous (batch, heads, seqlen, head_dim) tensors),
// or a transposed view of one. One place, so the predictions cannot drift from the rule.
#pragma once

#include <spattn/io.hpp>

#include <algorithm>
#include <cstdint>

namespace spattn::schedules {

// Lines of a move of rows [row0, row0 + rows) of a rows-by-`width` row-major array (all columns).
inline int64_t dense_rows_lines(int64_t row0, int64_t rows, int64_t width, int64_t line_words) {
  return io::tile_lines(width, 1, width, row0, 0, rows, width, line_words);
}

// Lines of moving `count` consecutive tiles of `block` rows, from tile `first` on, of a row-major
// array of `rows` rows by `width` (each tile its own move: the sum of dense_rows_lines over the
// tiles; the array's last tile may be shorter), in O(line_words) whatever the count. A row of a
// matrix (width > 1) costs the same lines wherever it lies; a vector's (width 1) tiles together
// span one segment, and each boundary between two of them that falls inside a line adds that line
// once more.
inline int64_t dense_tile_run_lines(int64_t first, int64_t count, int64_t block, int64_t rows, int64_t width,
                                    int64_t line_words) {
  if (count <= 0) return 0;
  const int64_t row0 = first * block, run_rows = std::min(count * block, rows - row0);
  if (width > 1) return dense_rows_lines(row0, run_rows, width, line_words);
  int64_t lines = 0;
  if ((first + count) * block > rows) {  // the run ends with the vector's short last tile
    --count;
    lines += dense_rows_lines((first + count) * block, rows - (first + count) * block, width, line_words);
    if (count == 0) return lines;
  }
  lines += io::segment_lines(row0, count * block, line_words);
  // Boundaries k = 1 .. count - 1 at row0 + k block; their offsets within a line repeat with a
  // period of at most line_words.
  int64_t period = 1;
  while ((period * block) % line_words != 0) ++period;
  const auto on_line = [&](int64_t k) { return (row0 + k * block) % line_words == 0; };
  int64_t aligned_per_period = 0;
  for (int64_t k = 1; k <= period; ++k) aligned_per_period += on_line(k) ? 1 : 0;
  const int64_t boundaries = count - 1;
  int64_t aligned = (boundaries / period) * aligned_per_period;
  for (int64_t k = 1; k <= boundaries % period; ++k) aligned += on_line(k) ? 1 : 0;
  return lines + boundaries - aligned;
}

// Lines of moving every tile of the grid of tile_rows x tile_cols tiles over a rows x cols view:
// of a row-major array, or (transposed) of the transposed view of a row-major (cols, rows) array.
inline int64_t dense_grid_lines(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols,
                                int64_t line_words, bool transposed = false) {
  return io::grid_lines(transposed ? 1 : cols, transposed ? rows : 1, rows, cols, tile_rows, tile_cols,
                        line_words);
}

}  // namespace spattn::schedules
