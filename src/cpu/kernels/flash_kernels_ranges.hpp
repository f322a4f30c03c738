// Where a partial tile attends, for the flash kernels (flash_kernels_impl.hpp) to skip the rest:
// per block of kMaxBlockRows inner rows, the outer rows that attend any of them. A window's band
// edges and a causal mask's diagonal cross their tiles on a slant, so a good part of every such
// tile is masked for whole blocks of rows; the products skip those parts, and apply_bits fills
// them as it fills every masked entry. Skipping changes no result: a masked entry's probability
// is exactly 0 and adds nothing to any accumulator (an accumulator adds its inner rows in order,
// so leaving out a run of zero terms leaves the same sums).
// Included by flash_kernels_impl.hpp (one copy per instruction set, SPATTN_KERNEL_NAMESPACE).
#pragma once

#include "cpu/kernels/flash_kernels.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

// Inner rows per block (the planner's inner tiles are at most 16 rows unless the sequence is
// shorter than the outer tile; longer ones run in blocks of 8).
constexpr int kMaxBlockRows = kBlockRows;
// Blocks of a tile of up to 64 inner rows, the widest whose outer rows' bits fit in one word.
constexpr int kMaxRangeBlocks = 64 / kMaxBlockRows;

// Rows [begin, end) of a tile: the outer rows that attend a block of inner rows, or the inner
// rows that a chunk of outer rows attends; empty as {0, 0}.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Outer row o's bits over inner rows [0, rows_i), rows_i <= 64: bit i is the pair (o, i), stored
// at bit o * bit_stride + i of a partial tile (flash_kernels.hpp).
SPATTN_KERNEL_INLINE uint64_t outer_row_bits(const uint64_t* bits, int64_t bit_stride, int64_t o, int64_t rows_i) {
  const int64_t bit = o * bit_stride;
  const int64_t word = bit >> 6, shift = bit & 63;
  uint64_t field = bits[word] >> shift;
  if (shift + rows_i > 64) field |= bits[word + 1] << (64 - shift);
  return rows_i == 64 ? field : field & ((uint64_t{1} << rows_i) - 1);
}

// The attended outer rows of each block of inner rows [b 8, b 8 + 8), b < ceil(rows_i /
// kMaxBlockRows), written to `storage` (kMaxRangeBlocks entries), from the first to the last.
// Returns storage, or nullptr (nothing skipped: every block takes every outer row) for a full tile
// (bits == nullptr) or one wider than a word of bits (rows_i > 64).
SPATTN_KERNEL_INLINE const RowRange* attended_ranges(const uint64_t* bits, int64_t bit_stride, int64_t rows_i,
                                                     int64_t rows_o, RowRange* storage) {
  if (bits == nullptr || rows_i > 64) return nullptr;
  const int64_t blocks = (rows_i + kMaxBlockRows - 1) / kMaxBlockRows;
  constexpr uint64_t kBlockBits = (uint64_t{1} << kMaxBlockRows) - 1;
  for (int64_t b = 0; b < blocks; ++b) storage[b] = {rows_o, 0};  // begin > end: none found yet
  for (int64_t o = 0; o < rows_o; ++o) {
    const uint64_t field = outer_row_bits(bits, bit_stride, o, rows_i);
    if (field == 0) continue;
    for (int64_t b = 0; b < blocks; ++b) {
      if (((field >> (b * kMaxBlockRows)) & kBlockBits) == 0) continue;
      if (storage[b].begin > o) storage[b].begin = o;
      storage[b].end = o + 1;
    }
  }
  for (int64_t b = 0; b < blocks; ++b) {
    if (storage[b].begin >= storage[b].end) storage[b] = {0, 0};
  }
  return storage;
}

// The inner rows [begin, end) that outer rows [o_begin, o_end) attend, from the first to the
// last (empty as {0, 0}); every inner row when rows_i > 64.
SPATTN_KERNEL_INLINE RowRange attended_inner_rows(const uint64_t* bits, int64_t bit_stride, int64_t rows_i,
                                                    int64_t o_begin, int64_t o_end) {
  if (rows_i > 64) return {0, rows_i};
  uint64_t any = 0;
  for (int64_t o = o_begin; o < o_end; ++o) any |= outer_row_bits(bits, bit_stride, o, rows_i);
  if (any == 0) return {0, 0};
  int64_t begin = 0, end = 64;
  while (((any >> begin) & 1u) == 0) ++begin;
  while (((any >> (end - 1)) & 1u) == 0) --end;
  return {begin, end};
}

// Key tiles up to this many blocks of kMaxBlockRows rows get their query ranges
// (attended_query_ranges); longer ones are computed whole.
constexpr int kMaxKeyBlocks = 64;

// For the dK/dV pass's partial tile (outer rows = keys, inner = queries), per block of
// kMaxBlockRows key rows the query rows any of them attends: the ranges of dQ += dS K, whose inner
// rows are the keys. Written to `storage` (kMaxKeyBlocks entries); nullptr (every block takes
// every query row) for a full tile, more than 64 query rows or more than kMaxKeyBlocks blocks.
SPATTN_KERNEL_INLINE const RowRange* attended_query_ranges(const uint64_t* bits, int64_t bit_stride, int64_t rows_k,
                                                           int64_t rows_q, RowRange* storage) {
  const int64_t blocks = (rows_k + kMaxBlockRows - 1) / kMaxBlockRows;
  if (bits == nullptr || rows_q > 64 || blocks > kMaxKeyBlocks) return nullptr;
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t any = 0;
    const int64_t end = rows_k < (b + 1) * kMaxBlockRows ? rows_k : (b + 1) * kMaxBlockRows;
    for (int64_t o = b * kMaxBlockRows; o < end; ++o) any |= outer_row_bits(bits, bit_stride, o, rows_q);
    storage[b] = any == 0 ? RowRange{0, 0}
                          : RowRange{__builtin_ctzll(any), 64 - static_cast<int64_t>(__builtin_clzll(any))};
  }
  return storage;
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
