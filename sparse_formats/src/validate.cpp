// Structural validation of CSR and BSR data. Every check reads each array once (O(rows + nnz),
// no allocation beyond a bitmap of partial slots) and reads an array only after its length and
// the offsets into it have been checked, so a malformed input throws instead of crashing.
#include <algorithm>
#include <cstdint>
#include <sparse_formats/validate.hpp>
#include <string>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::blocks_along;
using internal::check_block_sizes;
using internal::check_shape;
using internal::checked_mul;
using internal::to_size;

// The field names of a compressed-row structure: CSR over elements or BSR over blocks.
struct CompressedNames {
  const char* ptr;   // "row_ptr"
  const char* idx;   // "col_idx"
  const char* rows;  // "num_rows"
  const char* row;   // "row"
};
constexpr CompressedNames kCsrNames{"row_ptr", "col_idx", "num_rows", "row"};
constexpr CompressedNames kBsrNames{"block_row_ptr", "block_col_idx", "num_block_rows",
                                    "block row"};

// The row-pointer / column-index checks shared by CSR (elements) and BSR (blocks).
template <typename Index>
void validate_compressed(const std::string& what, const CompressedNames& names, int64_t num_rows,
                         int64_t num_cols, const Index* ptr, int64_t ptr_size, const Index* idx,
                         int64_t idx_size) {
  // Unsigned so that num_rows = INT64_MAX (legal for int64) does not overflow.
  const uint64_t expected_ptr_size = static_cast<uint64_t>(num_rows) + 1;
  if (ptr_size < 0 || static_cast<uint64_t>(ptr_size) != expected_ptr_size) {
    fail(what, ": ", names.ptr, " has ", ptr_size, " entries, expected ", names.rows,
         " + 1 = ", expected_ptr_size);
  }
  if (ptr == nullptr) fail(what, ": ", names.ptr, " is null but must hold ", ptr_size, " entries");
  if (idx_size < 0) fail(what, ": ", names.idx, " has a negative size ", idx_size);
  if (idx_size > 0 && idx == nullptr) {
    fail(what, ": ", names.idx, " is null but must hold ", idx_size, " entries");
  }
  if (idx_size > internal::index_max<Index>()) {
    fail(what, ": ", names.idx, " has ", idx_size, " entries, more than the ",
         internal::index_name<Index>(), " index type can count (max ", internal::index_max<Index>(),
         ")");
  }
  if (ptr[0] != 0) fail(what, ": ", names.ptr, "[0] = ", ptr[0], " (must be 0)");
  for (int64_t i = 1; i <= num_rows; ++i) {
    if (ptr[i] < ptr[i - 1]) {
      fail(what, ": ", names.ptr, "[", i, "] = ", ptr[i], " < ", names.ptr, "[", i - 1,
           "] = ", ptr[i - 1], " (", names.ptr, " must not decrease)");
    }
  }
  if (static_cast<int64_t>(ptr[num_rows]) != idx_size) {
    fail(what, ": ", names.ptr, "[", num_rows, "] = ", ptr[num_rows], " but ", names.idx, " has ",
         idx_size, " entries (the last ", names.ptr, " entry must equal nnz)");
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t begin = ptr[r];
    const int64_t end = ptr[r + 1];
    for (int64_t k = begin; k < end; ++k) {
      const int64_t col = idx[k];
      if (col < 0 || col >= num_cols) {
        fail(what, ": ", names.idx, "[", k, "] = ", col, " is out of range [0, ", num_cols, ") (",
             names.row, " ", r, ")");
      }
      if (k > begin && col <= static_cast<int64_t>(idx[k - 1])) {
        if (col == static_cast<int64_t>(idx[k - 1])) {
          fail(what, ": ", names.idx, "[", k, "] = ", col, " repeats ", names.idx, "[", k - 1,
               "] (duplicate column in ", names.row, " ", r, ")");
        }
        fail(what, ": ", names.idx, "[", k, "] = ", col, " < ", names.idx, "[", k - 1,
             "] = ", idx[k - 1], " (columns must strictly increase within ", names.row, " ", r,
             ")");
      }
    }
  }
}

// The row that holds entry k (row_ptr already validated).
template <typename Index>
int64_t row_of_entry(const Index* row_ptr, int64_t num_rows, int64_t k) {
  const Index* after = std::upper_bound(row_ptr, row_ptr + num_rows + 1, static_cast<Index>(k));
  return static_cast<int64_t>(after - row_ptr) - 1;
}

template <typename Index>
void validate_blocks(const BsrPattern<Index>& bsr, const std::string& what) {
  check_block_sizes(what, bsr.block_m, bsr.block_n);
  check_shape<Index>(what, bsr.num_rows, bsr.num_cols);
  validate_compressed(what, kBsrNames, blocks_along(bsr.num_rows, bsr.block_m),
                      blocks_along(bsr.num_cols, bsr.block_n), bsr.block_row_ptr.data(),
                      static_cast<int64_t>(bsr.block_row_ptr.size()), bsr.block_col_idx.data(),
                      bsr.num_blocks());
}

// Calls visit(block, block_row, block_col) for every stored block of a validated pattern.
template <typename Index, typename Visit>
void for_each_block(const BsrPattern<Index>& bsr, Visit&& visit) {
  const int64_t num_block_rows = blocks_along(bsr.num_rows, bsr.block_m);
  for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
    for (int64_t b = bsr.block_row_ptr[block_row]; b < bsr.block_row_ptr[block_row + 1]; ++b) {
      visit(b, block_row, static_cast<int64_t>(bsr.block_col_idx[b]));
    }
  }
}

// kind is full / partial, full blocks have slot -1, partial blocks use the slots 0..P-1 once each.
template <typename Index>
int64_t validate_kinds_and_slots(const BsrMask<Index>& mask, const std::string& what) {
  const int64_t num_blocks = mask.blocks.num_blocks();
  if (static_cast<int64_t>(mask.kind.size()) != num_blocks) {
    fail(what, ": kind has ", mask.kind.size(), " entries, expected num_blocks = ", num_blocks);
  }
  if (static_cast<int64_t>(mask.partial_slot.size()) != num_blocks) {
    fail(what, ": partial_slot has ", mask.partial_slot.size(),
         " entries, expected num_blocks = ", num_blocks);
  }
  int64_t num_partial = 0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const BlockKind kind = mask.kind[to_size(b)];
    if (kind != BlockKind::full && kind != BlockKind::partial) {
      fail(what, ": kind[", b, "] = ", static_cast<int>(kind),
           " is neither full (0) nor partial (1)");
    }
    if (kind == BlockKind::partial) ++num_partial;
  }
  std::vector<int64_t> slot_user(to_size(num_partial), -1);  // (num_partial): block using a slot
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t slot = mask.partial_slot[to_size(b)];
    if (mask.kind[to_size(b)] == BlockKind::full) {
      if (slot != -1)
        fail(what, ": partial_slot[", b, "] = ", slot, " but block ", b, " is full (expected -1)");
      continue;
    }
    if (slot < 0 || slot >= num_partial) {
      fail(what, ": partial_slot[", b, "] = ", slot, " is out of range [0, ", num_partial,
           ") (block ", b, " is partial)");
    }
    if (slot_user[to_size(slot)] >= 0) {
      fail(what, ": partial_slot[", b, "] = ", slot, " is also used by block ",
           slot_user[to_size(slot)]);
    }
    slot_user[to_size(slot)] = b;
  }
  return num_partial;
}

// A partial block sets no bit beyond the matrix edge (nor in the padding of its last word), at
// least one in-range bit, and not every in-range bit (that block is full).
template <typename Index>
void validate_partial_bits(const BsrMask<Index>& mask, const std::string& what) {
  const BsrPatternView<Index> view = mask.blocks.view();
  const int64_t block_m = view.block_m;
  const int64_t block_n = view.block_n;
  const int64_t area = block_m * block_n;
  const int64_t words = blocks_along(area, 64);
  for_each_block(mask.blocks, [&](int64_t b, int64_t block_row, int64_t block_col) {
    if (mask.kind[to_size(b)] != BlockKind::partial) return;
    const uint64_t* bits = mask.partial_bits.data() + mask.partial_slot[to_size(b)] * words;
    const int64_t rows_in = view.block_rows_in(block_row);
    const int64_t cols_in = view.block_cols_in(block_col);
    int64_t stray = internal::first_set_bit(bits, rows_in * block_n, words * 64);
    int64_t set = 0;
    for (int64_t r = 0; r < rows_in; ++r) {
      set += internal::count_bits(bits, r * block_n, r * block_n + cols_in);
      const int64_t in_row =
          internal::first_set_bit(bits, r * block_n + cols_in, (r + 1) * block_n);
      if (in_row >= 0 && (stray < 0 || in_row < stray)) stray = in_row;
    }
    const auto where = [&] {
      return detail::concat(what, ": partial block ", b, " (block row ", block_row, ", block col ",
                            block_col, ")");
    };
    if (stray >= area) {
      fail(where(), " sets bit ", stray, ", beyond block_m * block_n = ", area,
           " (padding bits must be 0)");
    }
    if (stray >= 0) {
      fail(where(), " sets element (", stray / block_n, ", ", stray % block_n,
           ") of the block, beyond the matrix edge (the block covers ", rows_in, " x ", cols_in,
           " elements)");
    }
    if (set == 0) fail(where(), " sets no element (a stored block holds at least one)");
    if (set == rows_in * cols_in) {
      fail(where(), " sets all ", set, " in-range elements; kind[", b, "] must be full");
    }
  });
}

}  // namespace

template <typename Index>
void validate(const CsrPatternView<Index>& csr, int64_t row_ptr_size, int64_t col_idx_size,
              const std::string& what) {
  check_shape<Index>(what, csr.num_rows, csr.num_cols);
  validate_compressed(what, kCsrNames, csr.num_rows, csr.num_cols, csr.row_ptr, row_ptr_size,
                      csr.col_idx, col_idx_size);
}

template <typename Index>
void validate(const CsrPattern<Index>& csr, const std::string& what) {
  validate(csr.view(), static_cast<int64_t>(csr.row_ptr.size()),
           static_cast<int64_t>(csr.col_idx.size()), what);
}

template <typename Index, typename Value>
void validate(const CsrMatrix<Index, Value>& csr, const std::string& what) {
  validate(csr.pattern, what);
  const int64_t nnz = csr.nnz();
  if (static_cast<int64_t>(csr.values.size()) != nnz) {
    fail(what, ": values has ", csr.values.size(), " entries, expected nnz = ", nnz);
  }
  for (int64_t k = 0; k < nnz; ++k) {
    const Value v = csr.values[to_size(k)];
    if (!internal::is_finite(v)) {
      fail(what, ": values[", k, "] = ", v, " is not finite (row ",
           row_of_entry(csr.pattern.row_ptr.data(), csr.num_rows(), k), ", col ",
           csr.pattern.col_idx[to_size(k)], ")");
    }
  }
}

template <typename Index>
void validate(const BsrPattern<Index>& bsr, const std::string& what) {
  validate_blocks(bsr, what);
}

template <typename Index>
void validate(const BsrMask<Index>& mask, const std::string& what) {
  validate_blocks(mask.blocks, what);
  const int64_t area =
      checked_mul(what, "block_m", mask.blocks.block_m, "block_n", mask.blocks.block_n);
  const int64_t num_partial = validate_kinds_and_slots(mask, what);
  const int64_t words = blocks_along(area, 64);
  const int64_t expected = checked_mul(what, "num_partial", num_partial, "words_per_block", words);
  if (static_cast<int64_t>(mask.partial_bits.size()) != expected) {
    fail(what, ": partial_bits has ", mask.partial_bits.size(), " words, expected ", num_partial,
         " partial blocks * ", words, " words_per_block = ", expected);
  }
  validate_partial_bits(mask, what);
}

template <typename Index, typename Value>
void validate(const BsrMatrix<Index, Value>& bsr, const std::string& what) {
  validate_blocks(bsr.blocks, what);
  const int64_t block_m = bsr.blocks.block_m;
  const int64_t block_n = bsr.blocks.block_n;
  const int64_t area = checked_mul(what, "block_m", block_m, "block_n", block_n);
  const int64_t num_blocks = bsr.blocks.num_blocks();
  const int64_t expected = checked_mul(what, "num_blocks", num_blocks, "block_m * block_n", area);
  if (static_cast<int64_t>(bsr.values.size()) != expected) {
    fail(what, ": values has ", bsr.values.size(),
         " entries, expected num_blocks * block_m * block_n = ", num_blocks, " * ", block_m, " * ",
         block_n, " = ", expected);
  }
  const BsrPatternView<Index> view = bsr.blocks.view();
  for_each_block(bsr.blocks, [&](int64_t b, int64_t block_row, int64_t block_col) {
    const int64_t rows_in = view.block_rows_in(block_row);
    const int64_t cols_in = view.block_cols_in(block_col);
    for (int64_t e = 0; e < area; ++e) {
      const int64_t k = b * area + e;
      const Value v = bsr.values[to_size(k)];
      const int64_t r = e / block_n;
      const int64_t c = e % block_n;
      if (!internal::is_finite(v)) {
        fail(what, ": values[", k, "] = ", v, " is not finite (block ", b, ", element (", r, ", ",
             c, "))");
      }
      if ((r >= rows_in || c >= cols_in) && v != Value{0}) {
        fail(what, ": values[", k, "] = ", v, " is element (", r, ", ", c, ") of block ", b,
             " (block row ", block_row, ", block col ", block_col,
             "), beyond the matrix edge (must be 0; the block covers ", rows_in, " x ", cols_in,
             " elements)");
      }
    }
  });
}

template void validate<int32_t>(const CsrPatternView<int32_t>&, int64_t, int64_t,
                                const std::string&);
template void validate<int64_t>(const CsrPatternView<int64_t>&, int64_t, int64_t,
                                const std::string&);
template void validate<int32_t>(const CsrPattern<int32_t>&, const std::string&);
template void validate<int64_t>(const CsrPattern<int64_t>&, const std::string&);
template void validate<int32_t, float>(const CsrMatrix<int32_t, float>&, const std::string&);
template void validate<int32_t, double>(const CsrMatrix<int32_t, double>&, const std::string&);
template void validate<int64_t, float>(const CsrMatrix<int64_t, float>&, const std::string&);
template void validate<int64_t, double>(const CsrMatrix<int64_t, double>&, const std::string&);
template void validate<int32_t>(const BsrPattern<int32_t>&, const std::string&);
template void validate<int64_t>(const BsrPattern<int64_t>&, const std::string&);
template void validate<int32_t>(const BsrMask<int32_t>&, const std::string&);
template void validate<int64_t>(const BsrMask<int64_t>&, const std::string&);
template void validate<int32_t, float>(const BsrMatrix<int32_t, float>&, const std::string&);
template void validate<int32_t, double>(const BsrMatrix<int32_t, double>&, const std::string&);
template void validate<int64_t, float>(const BsrMatrix<int64_t, float>&, const std::string&);
template void validate<int64_t, double>(const BsrMatrix<int64_t, double>&, const std::string&);

}  // namespace sparse_formats
