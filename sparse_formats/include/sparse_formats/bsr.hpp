// Block compressed sparse row: the structure is CSR over blocks of block_m x block_n elements.
//
// Block (I, J) covers element rows [I * block_m, min(num_rows, (I + 1) * block_m)) and columns
// [J * block_n, min(num_cols, (J + 1) * block_n)): when the shape is not a multiple of the block
// size the last block row / column is an edge block, clipped to the matrix. Block counts and
// element counts are kept distinct in names (num_block_rows vs num_rows).
//
// Three owning forms:
//   BsrPattern     which blocks are stored (every element of a stored block is present);
//   BsrMask        a pattern plus, per stored block, whether it is full (every in-range element
//                  attends) or partial, and for partial blocks the in-block element bits; this is
//                  what block-sparse attention walks;
//   BsrMatrix      a pattern plus dense block values, row-major within a block, block_m * block_n
//                  per block, zero beyond the matrix edge.
#pragma once

#include <cstdint>
#include <vector>

namespace sparse_formats {

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

template <typename Index>
struct BsrPatternView {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t block_m = 1;
  int64_t block_n = 1;
  const Index* block_row_ptr = nullptr;  // (num_block_rows + 1)
  const Index* block_col_idx = nullptr;  // (num_blocks)

  int64_t num_block_rows() const { return ceil_div(num_rows, block_m); }
  int64_t num_block_cols() const { return ceil_div(num_cols, block_n); }
  int64_t num_blocks() const {
    return block_row_ptr ? static_cast<int64_t>(block_row_ptr[num_block_rows()]) : 0;
  }
  // Rows / columns actually covered by block row I / block column J (edge blocks are shorter).
  int64_t block_rows_in(int64_t block_row) const {
    const int64_t begin = block_row * block_m;
    return num_rows - begin < block_m ? num_rows - begin : block_m;
  }
  int64_t block_cols_in(int64_t block_col) const {
    const int64_t begin = block_col * block_n;
    return num_cols - begin < block_n ? num_cols - begin : block_n;
  }
};

template <typename Index>
struct BsrPattern {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t block_m = 1;
  int64_t block_n = 1;
  std::vector<Index> block_row_ptr{Index{0}};  // (num_block_rows + 1)
  std::vector<Index> block_col_idx;            // (num_blocks)

  int64_t num_blocks() const { return static_cast<int64_t>(block_col_idx.size()); }
  BsrPatternView<Index> view() const {
    return {num_rows, num_cols, block_m, block_n, block_row_ptr.data(), block_col_idx.data()};
  }
};

enum class BlockKind : uint8_t { full = 0, partial = 1 };

// Sets bits [first, last) of a partial block's bit set (bit b is bit b % 64 of word b / 64): one
// row's run of attended columns a word at a time.
inline void set_bit_range(uint64_t* words, int64_t first, int64_t last) {
  while (first < last) {
    const int64_t word = first / 64, bit = first % 64;
    const int64_t count = 64 - bit < last - first ? 64 - bit : last - first;
    const uint64_t ones = count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1);
    words[word] |= ones << bit;
    first += count;
  }
}

template <typename Index>
struct BsrMask {
  BsrPattern<Index> blocks;
  std::vector<BlockKind> kind;        // (num_blocks)
  std::vector<int64_t> partial_slot;  // (num_blocks): index into the partial bit sets, -1 if full
  // (num_partial * words_per_block()): bit r * block_n + c of a partial block's set is element
  // (r, c) of that block; bits beyond the matrix edge are zero.
  std::vector<uint64_t> partial_bits;

  int64_t words_per_block() const { return ceil_div(blocks.block_m * blocks.block_n, 64); }
  int64_t num_partial() const {
    const int64_t words = words_per_block();
    return words == 0 ? 0 : static_cast<int64_t>(partial_bits.size()) / words;
  }
  // Whether element (r, c) of stored block number `block` (an index into block_col_idx) attends.
  bool contains(int64_t block, int64_t r, int64_t c) const {
    if (kind[block] == BlockKind::full) return true;
    const int64_t bit = r * blocks.block_n + c;
    const uint64_t word = partial_bits[partial_slot[block] * words_per_block() + bit / 64];
    return (word >> (bit % 64)) & 1u;
  }
};

template <typename Index, typename Value>
struct BsrMatrix {
  BsrPattern<Index> blocks;
  std::vector<Value> values;  // (num_blocks * block_m * block_n)

  int64_t num_rows() const { return blocks.num_rows; }
  int64_t num_cols() const { return blocks.num_cols; }
};

}  // namespace sparse_formats
