// Transposes of CSR and BSR structures: a counting sort of the entries by column, O(nnz + cols)
// time and memory. Reading the rows in order makes each output row's columns come out sorted.
// The counts and the placement cursors live in the result's own row offsets, so beyond the input
// only the result is allocated; its num_cols + 1 offsets are sized by the shape, not by the
// entries, and allocated checked (format_internal.hpp).
// The BSR transposes run the same sort over blocks and then move whatever each block carries
// (kind and transposed bits for masks, transposed values for matrices).
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::to_size;

// The transposed structure; move(source, destination) is called for every entry, where both are
// positions in the respective col_idx arrays. `cols` names in.num_cols in errors.
template <typename Index, typename Move>
CsrPattern<Index> transpose_structure(const char* context, const char* cols,
                                      const CsrPatternView<Index>& in, Move&& move) {
  const int64_t nnz = in.nnz();
  CsrPattern<Index> out = internal::empty_pattern<Index>(context, in.num_cols, in.num_rows, cols);
  out.col_idx.resize(to_size(nnz));
  std::vector<Index>& ptr = out.row_ptr;
  for (int64_t k = 0; k < nnz; ++k) ++ptr[to_size(in.col_idx[k]) + 1];
  for (int64_t c = 0; c < in.num_cols; ++c) ptr[to_size(c + 1)] += ptr[to_size(c)];
  // ptr[c] is column c's start; used as its cursor it ends at column c + 1's start, and shifting
  // the offsets up by one restores them.
  for (int64_t r = 0; r < in.num_rows; ++r) {
    for (int64_t k = in.row_begin(r); k < in.row_end(r); ++k) {
      const int64_t destination = ptr[to_size(in.col_idx[k])]++;
      out.col_idx[to_size(destination)] = static_cast<Index>(r);
      move(k, destination);
    }
  }
  for (int64_t c = in.num_cols; c > 0; --c) ptr[to_size(c)] = ptr[to_size(c - 1)];
  ptr[0] = Index{0};
  return out;
}

// The block structure seen as a CSR pattern over blocks.
template <typename Index>
CsrPatternView<Index> blocks_as_csr(const BsrPatternView<Index>& bsr) {
  return {internal::blocks_along(bsr.num_rows, bsr.block_m),
          internal::blocks_along(bsr.num_cols, bsr.block_n), bsr.block_row_ptr, bsr.block_col_idx};
}

template <typename Index, typename Move>
BsrPattern<Index> transpose_blocks(const char* context, const BsrPatternView<Index>& in,
                                   Move&& move) {
  internal::check_block_sizes(context, in.block_m, in.block_n);
  const CsrPatternView<Index> blocks = blocks_as_csr(in);
  internal::check_view(context, blocks);
  CsrPattern<Index> transposed = transpose_structure(context, "num_block_cols", blocks, move);
  BsrPattern<Index> out;
  out.num_rows = in.num_cols;
  out.num_cols = in.num_rows;
  out.block_m = in.block_n;
  out.block_n = in.block_m;
  out.block_row_ptr = std::move(transposed.row_ptr);
  out.block_col_idx = std::move(transposed.col_idx);
  return out;
}

}  // namespace

template <typename Index>
CsrPattern<Index> transpose(const CsrPatternView<Index>& pattern) {
  internal::check_view("transpose", pattern);
  return transpose_structure("transpose", "num_cols", pattern, [](int64_t, int64_t) {});
}

template <typename Index, typename Value>
CsrMatrix<Index, Value> transpose(const CsrMatrixView<Index, Value>& csr) {
  internal::check_view("transpose", csr.pattern);
  if (csr.nnz() > 0 && csr.values == nullptr) fail("transpose: values is null");
  CsrMatrix<Index, Value> out;
  out.values.resize(to_size(csr.nnz()));
  out.pattern = transpose_structure("transpose", "num_cols", csr.pattern,
                                    [&](int64_t source, int64_t destination) {
                                      out.values[to_size(destination)] = csr.values[source];
                                    });
  return out;
}

template <typename Index>
BsrPattern<Index> transpose(const BsrPatternView<Index>& bsr) {
  return transpose_blocks("transpose", bsr, [](int64_t, int64_t) {});
}

template <typename Index>
BsrMask<Index> transpose(const BsrMask<Index>& mask) {
  internal::check_mask_sizes("transpose", mask);
  const int64_t num_blocks = mask.blocks.num_blocks();
  const int64_t block_m = mask.blocks.block_m;
  const int64_t block_n = mask.blocks.block_n;
  BsrMask<Index> out;
  std::vector<int64_t> source_of(to_size(num_blocks));  // (num_blocks): output block -> input block
  out.blocks = transpose_blocks(
      "transpose", mask.blocks.view(),
      [&](int64_t source, int64_t destination) { source_of[to_size(destination)] = source; });
  // Partial slots are renumbered in output block order, as csr_to_bsr_mask numbers them.
  const int64_t words = mask.words_per_block();
  out.kind.resize(to_size(num_blocks));
  out.partial_slot.assign(to_size(num_blocks), -1);
  out.partial_bits.assign(mask.partial_bits.size(), 0);
  int64_t num_partial = 0;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t source = source_of[to_size(b)];
    out.kind[to_size(b)] = mask.kind[to_size(source)];
    if (mask.kind[to_size(source)] != BlockKind::partial) continue;
    const int64_t slot = num_partial++;
    out.partial_slot[to_size(b)] = slot;
    const uint64_t* in_bits = mask.partial_bits.data() + mask.partial_slot[to_size(source)] * words;
    uint64_t* out_bits = out.partial_bits.data() + slot * words;
    // Element (r, c) of the block_m x block_n input block is (c, r) of the block_n x block_m one.
    internal::for_each_set_bit(in_bits, 0, block_m * block_n, [&](int64_t bit) {
      internal::set_bit(out_bits, (bit % block_n) * block_m + bit / block_n);
    });
  }
  return out;
}

template <typename Index, typename Value>
BsrMatrix<Index, Value> transpose(const BsrMatrix<Index, Value>& bsr) {
  internal::check_matrix_sizes("transpose", bsr);
  const int64_t block_m = bsr.blocks.block_m;
  const int64_t block_n = bsr.blocks.block_n;
  BsrMatrix<Index, Value> out;
  out.values.resize(bsr.values.size());
  out.blocks =
      transpose_blocks("transpose", bsr.blocks.view(), [&](int64_t source, int64_t destination) {
        const Value* in = bsr.values.data() + source * block_m * block_n;
        Value* to = out.values.data() + destination * block_m * block_n;
        for (int64_t r = 0; r < block_m; ++r) {
          for (int64_t c = 0; c < block_n; ++c) {
            to[c * block_m + r] = in[r * block_n + c];
          }
        }
      });
  return out;
}

template CsrPattern<int32_t> transpose<int32_t>(const CsrPatternView<int32_t>&);
template CsrPattern<int64_t> transpose<int64_t>(const CsrPatternView<int64_t>&);
template CsrMatrix<int32_t, float> transpose<int32_t, float>(const CsrMatrixView<int32_t, float>&);
template CsrMatrix<int32_t, double> transpose<int32_t, double>(
    const CsrMatrixView<int32_t, double>&);
template CsrMatrix<int64_t, float> transpose<int64_t, float>(const CsrMatrixView<int64_t, float>&);
template CsrMatrix<int64_t, double> transpose<int64_t, double>(
    const CsrMatrixView<int64_t, double>&);
template BsrPattern<int32_t> transpose<int32_t>(const BsrPatternView<int32_t>&);
template BsrPattern<int64_t> transpose<int64_t>(const BsrPatternView<int64_t>&);
template BsrMask<int32_t> transpose<int32_t>(const BsrMask<int32_t>&);
template BsrMask<int64_t> transpose<int64_t>(const BsrMask<int64_t>&);
template BsrMatrix<int32_t, float> transpose<int32_t, float>(const BsrMatrix<int32_t, float>&);
template BsrMatrix<int32_t, double> transpose<int32_t, double>(const BsrMatrix<int32_t, double>&);
template BsrMatrix<int64_t, float> transpose<int64_t, float>(const BsrMatrix<int64_t, float>&);
template BsrMatrix<int64_t, double> transpose<int64_t, double>(const BsrMatrix<int64_t, double>&);

}  // namespace sparse_formats
