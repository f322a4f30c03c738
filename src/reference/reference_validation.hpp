// Argument checks of the reference, done once at its boundary (docs/architecture.md: validate once,
// at the API boundary). Each throws spattn::InvalidArgument with a message that starts with the
// caller's name ("reference::forward") and names the argument and the values. Private to
// src/reference.
#pragma once

#include <spattn/reference.hpp>

#include <cstdint>
#include <string>

namespace spattn::reference::detail {

// The sizes of one attention call, after checking that q, k, v (and d_o) agree.
struct AttentionShape {
  int64_t batch = 0;
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key / value heads; heads % kv_heads == 0 when heads > 0
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;    // of q and k
  int64_t head_dim_v = 0;  // of v, d_o and o

  int64_t group_size() const { return kv_heads > 0 ? heads / kv_heads : 0; }
};

// `where` is the public function's name; d_o may be nullptr (forward).
template <typename Index>
AttentionShape check_attention_args(const char* where, const TensorView<const double>& q,
                                    const TensorView<const double>& k,
                                    const TensorView<const double>& v,
                                    const TensorView<const double>* d_o,
                                    const MaskList<Index>& masks, double scale);

// The mask that (b, h) uses, given a mask list that passed check_attention_args.
inline int64_t mask_index(int64_t num_masks, int64_t heads, int64_t b, int64_t h) {
  if (num_masks == 1) return 0;
  if (num_masks == heads) return h;
  return b * heads + h;
}

// Shape num_rows x num_cols and cheap structure: row_ptr present, starting at 0, never decreasing;
// col_idx present when nnz > 0; columns in [0, num_cols) and strictly increasing within a row.
// `name` is how the message calls the mask ("masks[3]", "mask"), `shape_name` the expected shape
// in the caller's words ("seqlen_q x seqlen_k", "n x n").
template <typename Index>
void check_mask(const char* where, const std::string& name,
                const sparse_formats::CsrPatternView<Index>& mask, int64_t num_rows,
                int64_t num_cols, const char* shape_name);

void check_scale(const char* where, double scale);

}  // namespace spattn::reference::detail
