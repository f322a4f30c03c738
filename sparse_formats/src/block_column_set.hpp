// The set of block columns touched by one block row while CSR is gathered into BSR.
//
// Usage per block row: insert() the block column of every entry, finish(), then blocks() are the
// distinct block columns in increasing order and rank(j) is j's position among them; clear()
// before the next block row.
//
// Normally a scratch array of num_block_cols ranks makes insert / rank O(1) and clear O(touched).
// When the matrix is far wider than it has entries (a 4 x 2^40 int64 pattern) that scratch would
// dwarf the data, so the set falls back to sort + unique and binary search: O(nnz log nnz) time,
// and memory stays O(nnz + rows) either way.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sparse_formats::internal {

class BlockColumnSet {
 public:
  BlockColumnSet(int64_t num_block_cols, int64_t nnz)
      : use_scratch_(num_block_cols <= 4096 || (num_block_cols - 4096) / 4 <= nnz) {
    if (use_scratch_) rank_of_.assign(static_cast<std::size_t>(num_block_cols), -1);
  }

  void insert(int64_t block_col) {
    if (use_scratch_) {
      int64_t& rank = rank_of_[static_cast<std::size_t>(block_col)];
      if (rank < 0) {
        rank = 0;  // seen; the final rank is assigned by finish()
        blocks_.push_back(block_col);
      }
    } else if (blocks_.empty() || blocks_.back() != block_col) {
      blocks_.push_back(block_col);  // duplicates removed by finish()
    }
  }

  void finish() {
    std::sort(blocks_.begin(), blocks_.end());
    if (use_scratch_) {
      for (std::size_t k = 0; k < blocks_.size(); ++k) {
        rank_of_[static_cast<std::size_t>(blocks_[k])] = static_cast<int64_t>(k);
      }
    } else {
      blocks_.erase(std::unique(blocks_.begin(), blocks_.end()), blocks_.end());
    }
  }

  const std::vector<int64_t>& blocks() const { return blocks_; }
  int64_t size() const { return static_cast<int64_t>(blocks_.size()); }

  // Position of a block column that was inserted, among blocks() (valid after finish()).
  int64_t rank(int64_t block_col) const {
    if (use_scratch_) return rank_of_[static_cast<std::size_t>(block_col)];
    return static_cast<int64_t>(std::lower_bound(blocks_.begin(), blocks_.end(), block_col) -
                                blocks_.begin());
  }

  void clear() {
    if (use_scratch_) {
      for (const int64_t block_col : blocks_) rank_of_[static_cast<std::size_t>(block_col)] = -1;
    }
    blocks_.clear();
  }

  bool uses_scratch() const { return use_scratch_; }

 private:
  bool use_scratch_;
  std::vector<int64_t> rank_of_;  // (num_block_cols) when use_scratch_: -1 = untouched
  std::vector<int64_t> blocks_;
};

}  // namespace sparse_formats::internal
