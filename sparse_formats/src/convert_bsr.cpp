// CSR <-> BSR: gathering element entries into blocks, classifying blocks full / partial, and
// expanding blocks back into element entries.
//
// CSR -> BSR is one pass per block row: the block columns its entries touch are collected in a
// BlockColumnSet (a scratch of num_block_cols ranks), sorted, and then each entry is placed in its
// block by rank. O(nnz log + rows + num_block_cols) time; nothing of size num_rows * num_cols is
// ever allocated, so 131072^2 masks convert in O(nnz). What the block sizes alone size (partial
// bits, block values) and, for BSR -> CSR, the element rows and full blocks' entries, which the
// input's arrays do not bound, are allocated checked (format_internal.hpp).
#include <algorithm>
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <vector>

#include "block_column_set.hpp"
#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::BlockColumnSet;
using internal::blocks_along;
using internal::to_size;

// The element rows [begin, end) of one block row; computed without overflow for huge blocks.
struct RowRange {
  int64_t begin;
  int64_t end;
};
RowRange rows_of(int64_t block_row, int64_t block_m, int64_t num_rows) {
  const int64_t begin = block_row * block_m;
  return {begin, begin + std::min(block_m, num_rows - begin)};
}
int64_t cols_in(int64_t block_col, int64_t block_n, int64_t num_cols) {
  return std::min(block_n, num_cols - block_col * block_n);
}

// Builds the block structure of `p` and, after each block row's blocks are appended, calls
// fill(block_row, rows, first_block, set): the block row's blocks are block_col_idx[first_block +
// set.rank(J)] for the block columns J of its entries.
template <typename Index, typename Fill>
BsrPattern<Index> gather_blocks(const char* context, const CsrPatternView<Index>& p,
                                int64_t block_m, int64_t block_n, Fill&& fill) {
  internal::check_block_sizes(context, block_m, block_n);
  internal::check_view(context, p);
  const int64_t num_block_rows = blocks_along(p.num_rows, block_m);
  BsrPattern<Index> out;
  out.num_rows = p.num_rows;
  out.num_cols = p.num_cols;
  out.block_m = block_m;
  out.block_n = block_n;
  out.block_row_ptr.assign(to_size(num_block_rows) + 1, Index{0});
  BlockColumnSet set(blocks_along(p.num_cols, block_n), p.nnz());
  for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
    const RowRange rows = rows_of(block_row, block_m, p.num_rows);
    for (int64_t k = p.row_begin(rows.begin); k < p.row_begin(rows.end); ++k) {
      set.insert(static_cast<int64_t>(p.col_idx[k]) / block_n);
    }
    set.finish();
    const int64_t first_block = out.num_blocks();
    for (const int64_t block_col : set.blocks()) {
      out.block_col_idx.push_back(static_cast<Index>(block_col));
    }
    fill(block_row, rows, first_block, set);
    out.block_row_ptr[to_size(block_row + 1)] = static_cast<Index>(out.num_blocks());
    set.clear();
  }
  return out;
}

}  // namespace

template <typename Index>
BsrPattern<Index> csr_to_bsr_pattern(const CsrPatternView<Index>& pattern, int64_t block_m,
                                     int64_t block_n) {
  return gather_blocks("csr_to_bsr_pattern", pattern, block_m, block_n,
                       [](int64_t, RowRange, int64_t, const BlockColumnSet&) {});
}

template <typename Index>
BsrMask<Index> csr_to_bsr_mask(const CsrPatternView<Index>& pattern, int64_t block_m,
                               int64_t block_n) {
  const char* context = "csr_to_bsr_mask";
  internal::check_block_sizes(context, block_m, block_n);
  const int64_t words =
      blocks_along(internal::checked_mul(context, "block_m", block_m, "block_n", block_n), 64);
  BsrMask<Index> mask;
  std::vector<int64_t> count;  // (blocks in the block row): entries per block, then its slot
  mask.blocks = gather_blocks(
      context, pattern, block_m, block_n,
      [&](int64_t, RowRange rows, int64_t, const BlockColumnSet& set) {
        const int64_t first_entry = pattern.row_begin(rows.begin);
        const int64_t last_entry = pattern.row_begin(rows.end);
        count.assign(to_size(set.size()), 0);
        for (int64_t k = first_entry; k < last_entry; ++k) {
          ++count[to_size(set.rank(static_cast<int64_t>(pattern.col_idx[k]) / block_n))];
        }
        // Full iff every in-range element is present (columns within a row are distinct).
        for (int64_t q = 0; q < set.size(); ++q) {
          const int64_t block_col = set.blocks()[to_size(q)];
          const bool full = count[to_size(q)] ==
                            (rows.end - rows.begin) * cols_in(block_col, block_n, pattern.num_cols);
          mask.kind.push_back(full ? BlockKind::full : BlockKind::partial);
          int64_t slot = -1;
          if (!full) {
            // words comes from the block sizes alone: one entry in a 2^20 x 2^20 block asks for
            // 2^34 words, so the growth is checked against the allocation limit.
            slot = static_cast<int64_t>(mask.partial_bits.size()) / words;
            const int64_t total =
                internal::checked_mul(context, "num_partial", slot + 1, "words_per_block", words);
            internal::resize_checked(
                mask.partial_bits, total, context,
                [&] {
                  return detail::concat("partial_bits (num_partial * words_per_block = ", slot + 1,
                                        " * ", words, " words, block_m * block_n = ", block_m,
                                        " * ", block_n, ")");
                },
                uint64_t{0});
          }
          mask.partial_slot.push_back(slot);
          count[to_size(q)] = slot;
        }
        for (int64_t r = rows.begin; r < rows.end; ++r) {
          for (int64_t k = pattern.row_begin(r); k < pattern.row_end(r); ++k) {
            const int64_t col = pattern.col_idx[k];
            const int64_t slot = count[to_size(set.rank(col / block_n))];
            if (slot < 0) continue;
            const int64_t bit = (r - rows.begin) * block_n + col % block_n;
            internal::set_bit(mask.partial_bits.data() + slot * words, bit);
          }
        }
      });
  return mask;
}

template <typename Index>
CsrPattern<Index> bsr_mask_to_csr(const BsrMask<Index>& mask) {
  const char* context = "bsr_mask_to_csr";
  internal::check_mask_sizes(context, mask);
  const BsrPattern<Index>& blocks = mask.blocks;
  const int64_t block_n = blocks.block_n;
  const int64_t words = mask.words_per_block();
  const int64_t num_block_rows = blocks_along(blocks.num_rows, blocks.block_m);
  // Calls emit(row, col) for every set element, rows in order and columns increasing.
  const auto for_each_element = [&](auto&& emit) {
    for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
      const RowRange rows = rows_of(block_row, blocks.block_m, blocks.num_rows);
      const int64_t begin = blocks.block_row_ptr[to_size(block_row)];
      const int64_t end = blocks.block_row_ptr[to_size(block_row + 1)];
      if (begin == end) continue;  // not a step per element row of an empty block row
      for (int64_t r = rows.begin; r < rows.end; ++r) {
        for (int64_t b = begin; b < end; ++b) {
          const int64_t col0 = static_cast<int64_t>(blocks.block_col_idx[to_size(b)]) * block_n;
          const int64_t width = std::min(block_n, blocks.num_cols - col0);
          if (mask.kind[to_size(b)] == BlockKind::full) {
            for (int64_t c = 0; c < width; ++c) emit(r, col0 + c);
            continue;
          }
          const uint64_t* bits = mask.partial_bits.data() + mask.partial_slot[to_size(b)] * words;
          const int64_t row_bit = (r - rows.begin) * block_n;
          internal::for_each_set_bit(bits, row_bit, row_bit + width,
                                     [&](int64_t bit) { emit(r, col0 + bit - row_bit); });
        }
      }
    }
  };
  int64_t nnz = 0;
  for_each_element([&](int64_t, int64_t) { ++nnz; });
  internal::check_fits<Index>(context, "nnz", nnz);
  // num_rows and the full blocks' areas are not bounded by the input's arrays: checked.
  CsrPattern<Index> out = internal::empty_pattern<Index>(context, blocks.num_rows, blocks.num_cols);
  internal::check_allocation<Index>(
      context, [&] { return detail::concat("col_idx (nnz = ", nnz, ")"); }, nnz);
  out.col_idx.reserve(to_size(nnz));
  for_each_element([&](int64_t r, int64_t c) {
    out.col_idx.push_back(static_cast<Index>(c));
    out.row_ptr[to_size(r + 1)] = static_cast<Index>(out.col_idx.size());
  });
  // Rows without entries inherit the running count.
  for (int64_t r = 0; r < out.num_rows; ++r) {
    out.row_ptr[to_size(r + 1)] = std::max(out.row_ptr[to_size(r + 1)], out.row_ptr[to_size(r)]);
  }
  return out;
}

template <typename Index, typename Value>
BsrMatrix<Index, Value> csr_to_bsr(const CsrMatrixView<Index, Value>& csr, int64_t block_m,
                                   int64_t block_n) {
  const char* context = "csr_to_bsr";
  internal::check_block_sizes(context, block_m, block_n);
  const int64_t area = internal::checked_mul(context, "block_m", block_m, "block_n", block_n);
  const CsrPatternView<Index>& p = csr.pattern;
  if (p.row_ptr != nullptr && p.nnz() > 0 && csr.values == nullptr)
    fail(context, ": values is null");
  BsrMatrix<Index, Value> bsr;
  bsr.blocks = gather_blocks(
      context, p, block_m, block_n,
      [&](int64_t, RowRange rows, int64_t first_block, const BlockColumnSet& set) {
        const int64_t num_blocks = first_block + set.size();
        internal::resize_checked(
            bsr.values,
            internal::checked_mul(context, "num_blocks", num_blocks, "block_m * block_n", area),
            context,
            [&] {
              return detail::concat("values (num_blocks * block_m * block_n = ", num_blocks, " * ",
                                    block_m, " * ", block_n, ")");
            },
            Value{0});
        for (int64_t r = rows.begin; r < rows.end; ++r) {
          for (int64_t k = p.row_begin(r); k < p.row_end(r); ++k) {
            const int64_t col = p.col_idx[k];
            const int64_t block = first_block + set.rank(col / block_n);
            bsr.values[to_size(block * area + (r - rows.begin) * block_n + col % block_n)] =
                csr.values[k];
          }
        }
      });
  return bsr;
}

template <typename Index, typename Value>
CsrMatrix<Index, Value> bsr_to_csr(const BsrMatrix<Index, Value>& bsr) {
  const char* context = "bsr_to_csr";
  internal::check_matrix_sizes(context, bsr);
  const BsrPattern<Index>& blocks = bsr.blocks;
  const int64_t block_n = blocks.block_n;
  const int64_t area = blocks.block_m * block_n;
  const int64_t num_block_rows = blocks_along(blocks.num_rows, blocks.block_m);
  // Calls emit(row, col, value) for every in-range nonzero, rows in order, columns increasing.
  const auto for_each_nonzero = [&](auto&& emit) {
    for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
      const RowRange rows = rows_of(block_row, blocks.block_m, blocks.num_rows);
      const int64_t begin = blocks.block_row_ptr[to_size(block_row)];
      const int64_t end = blocks.block_row_ptr[to_size(block_row + 1)];
      if (begin == end) continue;  // not a step per element row of an empty block row
      for (int64_t r = rows.begin; r < rows.end; ++r) {
        for (int64_t b = begin; b < end; ++b) {
          const int64_t col0 = static_cast<int64_t>(blocks.block_col_idx[to_size(b)]) * block_n;
          const int64_t width = std::min(block_n, blocks.num_cols - col0);
          const Value* row_values = bsr.values.data() + b * area + (r - rows.begin) * block_n;
          for (int64_t c = 0; c < width; ++c) {
            if (row_values[c] != Value{0}) emit(r, col0 + c, row_values[c]);
          }
        }
      }
    }
  };
  int64_t nnz = 0;
  for_each_nonzero([&](int64_t, int64_t, Value) { ++nnz; });
  internal::check_fits<Index>(context, "nnz", nnz);
  CsrMatrix<Index, Value> out;
  out.pattern = internal::empty_pattern<Index>(context, blocks.num_rows, blocks.num_cols);
  out.pattern.col_idx.reserve(to_size(nnz));
  out.values.reserve(to_size(nnz));
  for_each_nonzero([&](int64_t r, int64_t c, Value v) {
    out.pattern.col_idx.push_back(static_cast<Index>(c));
    out.values.push_back(v);
    out.pattern.row_ptr[to_size(r + 1)] = static_cast<Index>(out.values.size());
  });
  for (int64_t r = 0; r < out.num_rows(); ++r) {
    out.pattern.row_ptr[to_size(r + 1)] =
        std::max(out.pattern.row_ptr[to_size(r + 1)], out.pattern.row_ptr[to_size(r)]);
  }
  return out;
}

template BsrPattern<int32_t> csr_to_bsr_pattern<int32_t>(const CsrPatternView<int32_t>&, int64_t,
                                                         int64_t);
template BsrPattern<int64_t> csr_to_bsr_pattern<int64_t>(const CsrPatternView<int64_t>&, int64_t,
                                                         int64_t);
template BsrMask<int32_t> csr_to_bsr_mask<int32_t>(const CsrPatternView<int32_t>&, int64_t,
                                                   int64_t);
template BsrMask<int64_t> csr_to_bsr_mask<int64_t>(const CsrPatternView<int64_t>&, int64_t,
                                                   int64_t);
template CsrPattern<int32_t> bsr_mask_to_csr<int32_t>(const BsrMask<int32_t>&);
template CsrPattern<int64_t> bsr_mask_to_csr<int64_t>(const BsrMask<int64_t>&);
template BsrMatrix<int32_t, float> csr_to_bsr<int32_t, float>(const CsrMatrixView<int32_t, float>&,
                                                              int64_t, int64_t);
template BsrMatrix<int32_t, double> csr_to_bsr<int32_t, double>(
    const CsrMatrixView<int32_t, double>&, int64_t, int64_t);
template BsrMatrix<int64_t, float> csr_to_bsr<int64_t, float>(const CsrMatrixView<int64_t, float>&,
                                                              int64_t, int64_t);
template BsrMatrix<int64_t, double> csr_to_bsr<int64_t, double>(
    const CsrMatrixView<int64_t, double>&, int64_t, int64_t);
template CsrMatrix<int32_t, float> bsr_to_csr<int32_t, float>(const BsrMatrix<int32_t, float>&);
template CsrMatrix<int32_t, double> bsr_to_csr<int32_t, double>(const BsrMatrix<int32_t, double>&);
template CsrMatrix<int64_t, float> bsr_to_csr<int64_t, float>(const BsrMatrix<int64_t, float>&);
template CsrMatrix<int64_t, double> bsr_to_csr<int64_t, double>(const BsrMatrix<int64_t, double>&);

}  // namespace sparse_formats
