// Conversions between dense, COO, CSR and BSR; transposes; block classification and statistics.
// Dense matrices are row-major arrays of num_rows * num_cols values. All functions produce valid
// structures (see validate.hpp) from valid inputs and throw FormatError on bad arguments (shapes,
// block sizes, null pointers, array lengths that disagree, outputs whose nnz overflows Index).
// Sparse inputs are otherwise trusted: validate() data from outside first. Sparse -> sparse
// conversions take O(nnz + rows + cols) memory (never num_rows * num_cols): beyond the input,
// only the result, whose row offsets are sized by the shape. A result array sized by a shape or
// block size rather than by the input's entries (row offsets, a dense grid, partial-block bits)
// that exceeds physical memory is a FormatError naming the function, the array, the argument and
// the size, e.g. "transpose: row_ptr (num_cols + 1 = 1125899906842625 offsets) needs ... bytes,
// more than the limit of ... bytes (physical memory)", never std::bad_alloc.
#pragma once

#include <sparse_formats/bsr.hpp>
#include <sparse_formats/csr.hpp>

#include <cstdint>
#include <vector>

namespace sparse_formats {

// ---- dense <-> CSR ------------------------------------------------------------------------------
// Stores every nonzero (value != 0) of a dense row-major matrix. Throws if nnz overflows Index.
template <typename Index, typename Value>
CsrMatrix<Index, Value> dense_to_csr(const Value* dense, int64_t num_rows, int64_t num_cols);
// The pattern of a dense 0/1 (or bool-like: != 0) mask. Value is float, double or uint8_t.
template <typename Index, typename Value>
CsrPattern<Index> dense_to_csr_pattern(const Value* dense, int64_t num_rows, int64_t num_cols);
// Row-major dense, zeros where nothing is stored.
template <typename Index, typename Value>
std::vector<Value> csr_to_dense(const CsrMatrixView<Index, Value>& csr);
// 1 where the pattern stores an entry, else 0 (row-major, num_rows * num_cols bytes).
template <typename Index>
std::vector<uint8_t> csr_pattern_to_dense(const CsrPatternView<Index>& pattern);

// ---- COO -> CSR ---------------------------------------------------------------------------------
enum class DuplicatePolicy {
  reject,  // FormatError naming the first duplicate (row, col) and both positions
  sum,     // values of duplicate entries are added (the Matrix Market / scipy convention)
  last,    // the entry that comes last in the input wins
};
// Sorts (row, col) pairs; entries may come in any order. Rows / cols out of range are an error.
template <typename Index, typename Value>
CsrMatrix<Index, Value> coo_to_csr(int64_t num_rows, int64_t num_cols, const std::vector<int64_t>& rows,
                                   const std::vector<int64_t>& cols, const std::vector<Value>& values,
                                   DuplicatePolicy duplicates);
template <typename Index>
CsrPattern<Index> coo_to_csr_pattern(int64_t num_rows, int64_t num_cols,
                                     const std::vector<int64_t>& rows,
                                     const std::vector<int64_t>& cols, DuplicatePolicy duplicates);

// ---- index width ---------------------------------------------------------------------------------
// Throws if the target index type cannot hold nnz or the shape.
template <typename To, typename From>
CsrPattern<To> convert_index(const CsrPatternView<From>& pattern);

// ---- transposes (the backward pass walks the column lists) ---------------------------------------
template <typename Index>
CsrPattern<Index> transpose(const CsrPatternView<Index>& pattern);
template <typename Index, typename Value>
CsrMatrix<Index, Value> transpose(const CsrMatrixView<Index, Value>& csr);
// Transpose of the block structure: (num_cols x num_rows, blocks block_n x block_m).
template <typename Index>
BsrPattern<Index> transpose(const BsrPatternView<Index>& bsr);
// Transpose of a mask, in-block bits transposed too; partial slots renumbered in block order, so
// transpose(csr_to_bsr_mask(A, bm, bn)) == csr_to_bsr_mask(transpose(A), bn, bm).
template <typename Index>
BsrMask<Index> transpose(const BsrMask<Index>& mask);
template <typename Index, typename Value>
BsrMatrix<Index, Value> transpose(const BsrMatrix<Index, Value>& bsr);

// ---- CSR <-> BSR ---------------------------------------------------------------------------------
// The blocks (block_m x block_n) that hold at least one entry of the pattern.
template <typename Index>
BsrPattern<Index> csr_to_bsr_pattern(const CsrPatternView<Index>& pattern, int64_t block_m,
                                     int64_t block_n);
// The blocks that hold an entry, each classified full (every in-range element attends) or
// partial (with its element bits). This is the form block-sparse attention walks. Partial slots
// are numbered in block order. Block sizes may exceed the matrix (edge blocks are clipped).
template <typename Index>
BsrMask<Index> csr_to_bsr_mask(const CsrPatternView<Index>& pattern, int64_t block_m,
                               int64_t block_n);
// Back to the element pattern: every set element of every stored block.
template <typename Index>
CsrPattern<Index> bsr_mask_to_csr(const BsrMask<Index>& mask);
// Valued matrices: stored blocks are those holding an entry; absent in-block entries are zero.
template <typename Index, typename Value>
BsrMatrix<Index, Value> csr_to_bsr(const CsrMatrixView<Index, Value>& csr, int64_t block_m,
                                   int64_t block_n);
// Stores every nonzero of every stored block (explicit zeros inside blocks are dropped).
template <typename Index, typename Value>
CsrMatrix<Index, Value> bsr_to_csr(const BsrMatrix<Index, Value>& bsr);

// ---- statistics ----------------------------------------------------------------------------------
struct MaskStats {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  int64_t nnz = 0;             // attended pairs, |Omega|
  double density = 0.0;       // nnz / (num_rows * num_cols); 0 for an empty shape
  int64_t empty_rows = 0;      // rows with no entry (fully masked query rows)
  int64_t max_row_length = 0;
  // Block statistics (zero when computed from CSR without block sizes).
  int64_t block_m = 0;
  int64_t block_n = 0;
  int64_t stored_blocks = 0;
  int64_t full_blocks = 0;
  int64_t partial_blocks = 0;
  double block_density = 0.0;  // stored_blocks / (num_block_rows * num_block_cols)
  int64_t empty_block_rows = 0;
};
template <typename Index>
MaskStats mask_stats(const CsrPatternView<Index>& pattern);
template <typename Index>
MaskStats mask_stats(const BsrMask<Index>& mask);

}  // namespace sparse_formats
