// Terminal pictures of masks at cell granularity, for `spattn patterns` and test failure messages.
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace sparse_formats {

using namespace patterns_internal;

int64_t render_cell_size(int64_t num_rows, int64_t num_cols, int64_t max_width) {
  check_at_least("render_mask_blocks", "max_width", max_width, 1);
  check_at_least("render_mask_blocks", "num_rows", num_rows, 0);
  check_at_least("render_mask_blocks", "num_cols", num_cols, 0);
  return std::max<int64_t>(
      {1, ceil_div_safe(num_rows, max_width), ceil_div_safe(num_cols, max_width)});
}

template <typename Index>
std::string render_mask_blocks(const CsrPatternView<Index>& mask, int64_t max_width) {
  const int64_t cell = render_cell_size(mask.num_rows, mask.num_cols, max_width);
  if (mask.num_rows == 0 || mask.num_cols == 0) return "";
  if (mask.row_ptr == nullptr)
    fail("render_mask_blocks: mask has ", mask.num_rows, " rows but no row_ptr");
  const int64_t width = ceil_div_safe(mask.num_cols, cell);
  const int64_t height = ceil_div_safe(mask.num_rows, cell);
  std::string picture;
  picture.reserve(static_cast<size_t>(height * (width + 1)));
  std::vector<int64_t> counts(static_cast<size_t>(width));
  for (int64_t cell_row = 0; cell_row < height; ++cell_row) {
    std::fill(counts.begin(), counts.end(), 0);
    const int64_t row_begin = cell_row * cell;
    const int64_t row_end = std::min(mask.num_rows, sat_add(row_begin, cell));
    for (int64_t row = row_begin; row < row_end; ++row) {
      for (int64_t k = mask.row_begin(row); k < mask.row_end(row); ++k) {
        ++counts[static_cast<size_t>(static_cast<int64_t>(mask.col_idx[k]) / cell)];
      }
    }
    for (int64_t cell_col = 0; cell_col < width; ++cell_col) {
      // Edge cells are clipped to the matrix: full means every in-range element attends.
      const int64_t cols_in =
          std::min(mask.num_cols, sat_add(cell_col * cell, cell)) - cell_col * cell;
      const int64_t area = sat_mul(row_end - row_begin, cols_in);
      const int64_t count = counts[static_cast<size_t>(cell_col)];
      picture += count == 0 ? '.' : (count == area ? '#' : '+');
    }
    picture += '\n';
  }
  return picture;
}

// Per cell row, each interval adds its pairs to its first and last cells directly and a whole cell
// width to every cell between (a difference array over the cells).
std::string render_mask_blocks(const IntervalPattern& mask, int64_t max_width) {
  const int64_t cell = render_cell_size(mask.num_rows, mask.num_cols, max_width);
  if (mask.num_rows == 0 || mask.num_cols == 0) return "";
  const int64_t width = ceil_div_safe(mask.num_cols, cell);
  const int64_t height = ceil_div_safe(mask.num_rows, cell);
  std::string picture;
  picture.reserve(static_cast<size_t>(height * (width + 1)));
  std::vector<int64_t> counts(static_cast<size_t>(width)), whole(static_cast<size_t>(width) + 1);
  for (int64_t cell_row = 0; cell_row < height; ++cell_row) {
    std::fill(counts.begin(), counts.end(), 0);
    std::fill(whole.begin(), whole.end(), 0);
    const int64_t row_begin = cell_row * cell;
    const int64_t row_end = std::min(mask.num_rows, sat_add(row_begin, cell));
    for (int64_t k = mask.row_begin(row_begin); k < mask.row_begin(row_end); ++k) {
      const int64_t lo = mask.begin[static_cast<size_t>(k)], hi = mask.end[static_cast<size_t>(k)];
      const int64_t first = lo / cell, last = (hi - 1) / cell;
      if (first == last) {
        counts[static_cast<size_t>(first)] += hi - lo;
        continue;
      }
      counts[static_cast<size_t>(first)] += (first + 1) * cell - lo;
      counts[static_cast<size_t>(last)] += hi - last * cell;
      ++whole[static_cast<size_t>(first) + 1];
      --whole[static_cast<size_t>(last)];
    }
    int64_t covering = 0;  // intervals covering this cell whole
    for (int64_t cell_col = 0; cell_col < width; ++cell_col) {
      covering += whole[static_cast<size_t>(cell_col)];
      const int64_t cols_in = std::min(mask.num_cols, sat_add(cell_col * cell, cell)) - cell_col * cell;
      const int64_t area = sat_mul(row_end - row_begin, cols_in);
      const int64_t count = counts[static_cast<size_t>(cell_col)] + covering * cell;
      picture += count == 0 ? '.' : (count == area ? '#' : '+');
    }
    picture += '\n';
  }
  return picture;
}

template std::string render_mask_blocks<int32_t>(const CsrPatternView<int32_t>&, int64_t);
template std::string render_mask_blocks<int64_t>(const CsrPatternView<int64_t>&, int64_t);

}  // namespace sparse_formats
