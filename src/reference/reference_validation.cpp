// Boundary checks of the reference: shapes of q, k, v, d_o; the mask list; the scale.
#include "reference/reference_validation.hpp"

#include "reference/finite_values.hpp"

#include <spattn/error.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <sstream>

namespace spattn::reference::detail {
namespace {

std::string shape_string(const TensorView<const double>& t) {
  std::ostringstream out;
  out << "(" << t.shape[0] << ", " << t.shape[1] << ", " << t.shape[2] << ", " << t.shape[3] << ")";
  return out.str();
}

// Shape non-negative, element count representable, data present when there is any element.
void check_tensor(const char* where, const char* name, const TensorView<const double>& t) {
  for (const int64_t extent : t.shape) {
    if (extent < 0) fail(where, ": ", name, " has a negative shape ", shape_string(t));
  }
  int64_t numel = 1;
  for (const int64_t extent : t.shape) {
    if (extent != 0 && numel > std::numeric_limits<int64_t>::max() / extent) {
      fail(where, ": ", name, " has shape ", shape_string(t), ", whose size overflows int64");
    }
    numel *= extent;
  }
  if (numel > 0 && t.data == nullptr) {
    fail(where, ": ", name, " has data = nullptr but shape ", shape_string(t), " (", numel,
         " entries)");
  }
}

// "k has head_dim 63, q has 64"
void check_extent(const char* where, const char* name, const char* field, int64_t value,
                  const char* other, int64_t expected) {
  if (value != expected) fail(where, ": ", name, " has ", field, " ", value, ", ", other, " has ", expected);
}

}  // namespace

void check_scale(const char* where, double scale) {
  if (!std::isfinite(scale)) fail(where, ": scale = ", scale, " is not finite");
}

template <typename Index>
void check_mask(const char* where, const std::string& name,
                const sparse_formats::CsrPatternView<Index>& mask, int64_t num_rows,
                int64_t num_cols, const char* shape_name) {
  if (mask.num_rows != num_rows || mask.num_cols != num_cols) {
    fail(where, ": ", name, " is ", mask.num_rows, " x ", mask.num_cols, ", expected ", shape_name,
         " = ", num_rows, " x ", num_cols);
  }
  if (mask.row_ptr == nullptr) {
    if (num_rows == 0) return;  // nothing to read: a 0-row view may omit row_ptr
    fail(where, ": ", name, ".row_ptr is null (", num_rows, " rows)");
  }
  if (mask.row_ptr[0] != 0) fail(where, ": ", name, ".row_ptr[0] = ", mask.row_ptr[0], ", expected 0");
  for (int64_t row = 0; row < num_rows; ++row) {
    if (mask.row_end(row) < mask.row_begin(row)) {
      fail(where, ": ", name, ".row_ptr[", row + 1, "] = ", mask.row_end(row), " < row_ptr[", row,
           "] = ", mask.row_begin(row), " (row_ptr must not decrease)");
    }
  }
  if (mask.nnz() > 0 && mask.col_idx == nullptr) {
    fail(where, ": ", name, ".col_idx is null but nnz = ", mask.nnz());
  }
  for (int64_t row = 0; row < num_rows; ++row) {
    for (int64_t pos = mask.row_begin(row); pos < mask.row_end(row); ++pos) {
      const int64_t col = static_cast<int64_t>(mask.col_idx[pos]);
      if (col < 0 || col >= num_cols) {
        fail(where, ": ", name, ".col_idx[", pos, "] = ", col, " is out of range [0, ", num_cols,
             ") (row ", row, ")");
      }
      if (pos > mask.row_begin(row) && col <= static_cast<int64_t>(mask.col_idx[pos - 1])) {
        fail(where, ": ", name, ".col_idx[", pos, "] = ", col, " does not exceed col_idx[", pos - 1,
             "] = ", static_cast<int64_t>(mask.col_idx[pos - 1]), " (row ", row,
             "; columns must strictly increase)");
      }
    }
  }
}

template <typename Index>
AttentionShape check_attention_args(const char* where, const TensorView<const double>& q,
                                    const TensorView<const double>& k,
                                    const TensorView<const double>& v,
                                    const TensorView<const double>* d_o,
                                    const MaskList<Index>& masks, double scale) {
  check_scale(where, scale);
  check_tensor(where, "q", q);
  check_tensor(where, "k", k);
  check_tensor(where, "v", v);
  if (d_o != nullptr) check_tensor(where, "d_o", *d_o);

  check_extent(where, "k", "batch", k.batch(), "q", q.batch());
  check_extent(where, "v", "batch", v.batch(), "q", q.batch());
  check_extent(where, "k", "head_dim", k.head_dim(), "q", q.head_dim());
  check_extent(where, "v", "seqlen", v.seqlen(), "k", k.seqlen());
  if (v.heads() != k.heads()) fail(where, ": v has ", v.heads(), " heads, k has ", k.heads());
  if (k.heads() == 0 && q.heads() > 0) {
    fail(where, ": k has 0 heads, q has ", q.heads());
  }
  if (k.heads() > 0 && q.heads() % k.heads() != 0) {
    fail(where, ": q has ", q.heads(), " heads, not a multiple of k's ", k.heads(),
         " (grouped-query attention needs heads % kv_heads == 0)");
  }
  if (d_o != nullptr) {
    check_extent(where, "d_o", "batch", d_o->batch(), "q", q.batch());
    if (d_o->heads() != q.heads()) fail(where, ": d_o has ", d_o->heads(), " heads, q has ", q.heads());
    check_extent(where, "d_o", "seqlen", d_o->seqlen(), "q", q.seqlen());
    check_extent(where, "d_o", "head_dim", d_o->head_dim(), "v", v.head_dim());
  }

  AttentionShape shape;
  shape.batch = q.batch();
  shape.heads = q.heads();
  shape.kv_heads = k.heads();
  shape.seqlen_q = q.seqlen();
  shape.seqlen_k = k.seqlen();
  shape.head_dim = q.head_dim();
  shape.head_dim_v = v.head_dim();

  const auto num_masks = static_cast<int64_t>(masks.size());
  if (num_masks != 1 && num_masks != shape.heads && num_masks != shape.batch * shape.heads) {
    fail(where, ": masks has ", num_masks, " entries, expected 1, heads = ", shape.heads,
         " or batch * heads = ", shape.batch * shape.heads);
  }
  for (std::size_t m = 0; m < masks.size(); ++m) {
    check_mask(where, "masks[" + std::to_string(m) + "]", masks[m], shape.seqlen_q, shape.seqlen_k,
               "seqlen_q x seqlen_k");
  }
  check_finite(where, "q", q);
  check_finite(where, "k", k);
  check_finite(where, "v", v);
  if (d_o != nullptr) check_finite(where, "d_o", *d_o);
  return shape;
}

template void check_mask<int32_t>(const char*, const std::string&,
                                  const sparse_formats::CsrPatternView<int32_t>&, int64_t, int64_t, const char*);
template void check_mask<int64_t>(const char*, const std::string&,
                                  const sparse_formats::CsrPatternView<int64_t>&, int64_t, int64_t, const char*);
template AttentionShape check_attention_args<int32_t>(
    const char*, const TensorView<const double>&, const TensorView<const double>&,
    const TensorView<const double>&, const TensorView<const double>*, const MaskList<int32_t>&, double);
template AttentionShape check_attention_args<int64_t>(
    const char*, const TensorView<const double>&, const TensorView<const double>&,
    const TensorView<const double>&, const TensorView<const double>*, const MaskList<int64_t>&, double);

}  // namespace spattn::reference::detail
