// Statistics of a mask: element counts from CSR, element and block counts from a BSR mask. The
// BSR version counts elements from the blocks (full blocks by area, partial ones by popcount)
// without expanding them.
#include <algorithm>
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::blocks_along;
using internal::to_size;

double ratio(int64_t part, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return 0.0;
  return static_cast<double>(part) / (static_cast<double>(rows) * static_cast<double>(cols));
}

}  // namespace

template <typename Index>
MaskStats mask_stats(const CsrPatternView<Index>& pattern) {
  internal::check_view("mask_stats", pattern);
  MaskStats stats;
  stats.num_rows = pattern.num_rows;
  stats.num_cols = pattern.num_cols;
  stats.nnz = pattern.nnz();
  stats.density = ratio(stats.nnz, pattern.num_rows, pattern.num_cols);
  for (int64_t r = 0; r < pattern.num_rows; ++r) {
    const int64_t length = pattern.row_length(r);
    stats.empty_rows += length == 0 ? 1 : 0;
    stats.max_row_length = std::max(stats.max_row_length, length);
  }
  return stats;
}

template <typename Index>
MaskStats mask_stats(const BsrMask<Index>& mask) {
  internal::check_mask_sizes("mask_stats", mask);
  const BsrPattern<Index>& blocks = mask.blocks;
  const int64_t block_m = blocks.block_m;
  const int64_t block_n = blocks.block_n;
  const int64_t words = mask.words_per_block();
  const int64_t num_block_rows = blocks_along(blocks.num_rows, block_m);
  const int64_t num_block_cols = blocks_along(blocks.num_cols, block_n);

  MaskStats stats;
  stats.num_rows = blocks.num_rows;
  stats.num_cols = blocks.num_cols;
  stats.block_m = block_m;
  stats.block_n = block_n;
  stats.stored_blocks = blocks.num_blocks();
  stats.block_density = ratio(stats.stored_blocks, num_block_rows, num_block_cols);

  std::vector<int64_t> row_length;  // (rows of the current block row)
  for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
    const int64_t row0 = block_row * block_m;
    const int64_t rows_in = std::min(block_m, blocks.num_rows - row0);
    const int64_t begin = blocks.block_row_ptr[to_size(block_row)];
    const int64_t end = blocks.block_row_ptr[to_size(block_row + 1)];
    stats.empty_block_rows += begin == end ? 1 : 0;
    // rows_in is min(block_m, rows left): a block size or shape, not an input array's length.
    internal::check_allocation<int64_t>(
        "mask_stats",
        [&] {
          return detail::concat("row_length (rows of block row ", block_row, " = ", rows_in, ")");
        },
        rows_in);
    row_length.assign(to_size(rows_in), 0);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t col0 = static_cast<int64_t>(blocks.block_col_idx[to_size(b)]) * block_n;
      const int64_t cols_in = std::min(block_n, blocks.num_cols - col0);
      if (mask.kind[to_size(b)] == BlockKind::full) {
        ++stats.full_blocks;
        for (int64_t r = 0; r < rows_in; ++r) row_length[to_size(r)] += cols_in;
        continue;
      }
      ++stats.partial_blocks;
      const uint64_t* bits = mask.partial_bits.data() + mask.partial_slot[to_size(b)] * words;
      for (int64_t r = 0; r < rows_in; ++r) {
        row_length[to_size(r)] += internal::count_bits(bits, r * block_n, r * block_n + cols_in);
      }
    }
    for (const int64_t length : row_length) {
      stats.nnz += length;
      stats.empty_rows += length == 0 ? 1 : 0;
      stats.max_row_length = std::max(stats.max_row_length, length);
    }
  }
  stats.density = ratio(stats.nnz, blocks.num_rows, blocks.num_cols);
  return stats;
}

template MaskStats mask_stats<int32_t>(const CsrPatternView<int32_t>&);
template MaskStats mask_stats<int64_t>(const CsrPatternView<int64_t>&);
template MaskStats mask_stats<int32_t>(const BsrMask<int32_t>&);
template MaskStats mask_stats<int64_t>(const BsrMask<int64_t>&);

}  // namespace sparse_formats
