// Structural validation of CSR / BSR data that came from outside (files, users, other libraries).
// Each check throws FormatError naming the argument, the field, the position and the values, e.g.
//   "mask: col_idx[12] = 40 is out of range [0, 32) (row 3)".
// `what` is the argument's name as the caller knows it ("mask", "q", "file.mtx").
#pragma once

#include <sparse_formats/bsr.hpp>
#include <sparse_formats/csr.hpp>

#include <string>

namespace sparse_formats {

// Shape >= 0 and num_rows, num_cols both fit the index type (so the transpose does too); row_ptr
// has num_rows + 1 entries, starts at 0 and never decreases; its end equals nnz and fits the index
// type; every column lies in [0, num_cols) and columns strictly increase within a row (no
// duplicates). `row_ptr_size` / `col_idx_size` are the lengths of the arrays the view points into
// (a view cannot know them). O(rows + nnz); nothing is read before its length has been checked.
template <typename Index>
void validate(const CsrPatternView<Index>& csr, int64_t row_ptr_size, int64_t col_idx_size,
              const std::string& what);
template <typename Index>
void validate(const CsrPattern<Index>& csr, const std::string& what);

// The pattern checks, plus: values has nnz entries, and each is finite (no NaN / Inf).
template <typename Index, typename Value>
void validate(const CsrMatrix<Index, Value>& csr, const std::string& what);

// The same checks over blocks: block sizes >= 1, block_row_ptr over num_block_rows, block columns
// within [0, num_block_cols) and strictly increasing per block row.
template <typename Index>
void validate(const BsrPattern<Index>& bsr, const std::string& what);
// The block checks, plus kind / partial_slot / partial_bits agree, and no bit lies beyond the
// matrix edge. In detail: block_m * block_n fits int64; kind and partial_slot have num_blocks
// entries; kind is full or partial; full blocks have slot -1 and the P partial blocks use the
// slots 0..P-1 once each (any order); partial_bits has P * words_per_block words; a partial block
// sets no bit beyond the edge or in its last word's padding, and the classification is canonical:
// a partial block sets at least one and not every in-range element (that block is full), as
// csr_to_bsr_mask produces.
template <typename Index>
void validate(const BsrMask<Index>& mask, const std::string& what);
// The block checks, plus values has num_blocks * block_m * block_n finite entries, zero beyond
// the matrix edge.
template <typename Index, typename Value>
void validate(const BsrMatrix<Index, Value>& bsr, const std::string& what);

}  // namespace sparse_formats
