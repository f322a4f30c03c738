// The fp64 attention reference: one query row at a time, its scores and probabilities
// materialized from the CSR mask, every sum a plain loop. Readability over speed; see
// include/spattn/reference.hpp for the definitions.
#include <spattn/reference.hpp>

#include "reference/reference_validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace spattn::reference {
namespace {

using detail::AttentionShape;

double dot(const TensorView<const double>& a, int64_t b_a, int64_t h_a, int64_t row_a,
           const TensorView<const double>& b, int64_t b_b, int64_t h_b, int64_t row_b) {
  double sum = 0.0;
  for (int64_t c = 0; c < a.head_dim(); ++c) sum += a.at(b_a, h_a, row_a, c) * b.at(b_b, h_b, row_b, c);
  return sum;
}

// Offset of (b, h, s, 0) in a contiguous (batch, heads, seqlen, dim) array.
std::size_t offset(int64_t b, int64_t h, int64_t s, int64_t heads, int64_t seqlen, int64_t dim) {
  return static_cast<std::size_t>(((b * heads + h) * seqlen + s) * dim);
}

std::size_t numel(int64_t a, int64_t b, int64_t c, int64_t d) {
  return static_cast<std::size_t>(a * b * c * d);
}

// Row i of head (b, h), kv head g: fills p with P_ij for the row's stored entries (in mask order)
// and returns L_i. An empty row leaves p empty and returns -inf.
template <typename Index>
double softmax_row(const TensorView<const double>& q, const TensorView<const double>& k,
                   const sparse_formats::CsrPatternView<Index>& mask, int64_t b, int64_t h,
                   int64_t g, int64_t i, double scale, std::vector<double>& p) {
  const int64_t begin = mask.row_begin(i);
  const int64_t end = mask.row_end(i);
  p.assign(static_cast<std::size_t>(end - begin), 0.0);
  if (begin == end) return -std::numeric_limits<double>::infinity();

  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t t = begin; t < end; ++t) {
    const auto j = static_cast<int64_t>(mask.col_idx[t]);
    const double s = scale * dot(q, b, h, i, k, b, g, j);  // S_ij = scale * q_i . k_j
    p[static_cast<std::size_t>(t - begin)] = s;
    row_max = std::max(row_max, s);
  }
  double row_sum = 0.0;  // sum_j exp(S_ij - max) >= 1, so the log below is finite
  for (const double s : p) row_sum += std::exp(s - row_max);
  // P_ij = exp(S_ij - L_i), computed as exp(S_ij - max) / sum: exp(S_ij - L_i) would lose the
  // low bits of L_i when |L_i| is large (1000 + ln 2 has an ulp of 1e-13).
  for (double& value : p) value = std::exp(value - row_max) / row_sum;
  return row_max + std::log(row_sum);
}

// Head (b, h)'s mask: the list's one mask, one per query head, or one per (batch, head).
template <typename Index>
const sparse_formats::CsrPatternView<Index>& head_mask(const MaskList<Index>& masks, int64_t heads, int64_t b,
                                                      int64_t h) {
  return masks[static_cast<std::size_t>(detail::mask_index(static_cast<int64_t>(masks.size()), heads, b, h))];
}

}  // namespace

template <typename Index>
ForwardResult forward(TensorView<const double> q, TensorView<const double> k,
                      TensorView<const double> v, const MaskList<Index>& masks, double scale) {
  const AttentionShape shape =
      detail::check_attention_args("reference::forward", q, k, v, nullptr, masks, scale);
  const int64_t dv = shape.head_dim_v;

  ForwardResult result;
  result.o.assign(numel(shape.batch, shape.heads, shape.seqlen_q, dv), 0.0);
  result.lse.assign(numel(shape.batch, shape.heads, shape.seqlen_q, 1), 0.0);
  std::vector<double> p;
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const int64_t g = h / shape.group_size();
      const auto& mask = head_mask(masks, shape.heads, b, h);
      for (int64_t i = 0; i < shape.seqlen_q; ++i) {
        result.lse[offset(b, h, i, shape.heads, shape.seqlen_q, 1)] =
            softmax_row(q, k, mask, b, h, g, i, scale, p);
        double* o_i = result.o.data() + offset(b, h, i, shape.heads, shape.seqlen_q, dv);  // (empty when dv = 0)
        for (int64_t t = mask.row_begin(i); t < mask.row_end(i); ++t) {  // O_i = sum_j P_ij v_j
          const auto j = static_cast<int64_t>(mask.col_idx[t]);
          const double p_ij = p[static_cast<std::size_t>(t - mask.row_begin(i))];
          for (int64_t c = 0; c < dv; ++c) o_i[c] += p_ij * v.at(b, g, j, c);
        }
      }
    }
  }
  return result;
}

template <typename Index>
BackwardResult backward(TensorView<const double> q, TensorView<const double> k,
                        TensorView<const double> v, TensorView<const double> d_o,
                        const MaskList<Index>& masks, double scale) {
  const AttentionShape shape =
      detail::check_attention_args("reference::backward", q, k, v, &d_o, masks, scale);
  const int64_t d = shape.head_dim;
  const int64_t dv = shape.head_dim_v;

  BackwardResult result;
  result.dq.assign(numel(shape.batch, shape.heads, shape.seqlen_q, d), 0.0);
  result.dk.assign(numel(shape.batch, shape.kv_heads, shape.seqlen_k, d), 0.0);
  result.dv.assign(numel(shape.batch, shape.kv_heads, shape.seqlen_k, dv), 0.0);
  std::vector<double> p;
  std::vector<double> o_i(static_cast<std::size_t>(dv));
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const int64_t g = h / shape.group_size();
      const auto& mask = head_mask(masks, shape.heads, b, h);
      for (int64_t i = 0; i < shape.seqlen_q; ++i) {
        softmax_row(q, k, mask, b, h, g, i, scale, p);
        const int64_t begin = mask.row_begin(i);
        const int64_t end = mask.row_end(i);

        // Forward line: O_i = sum_j P_ij v_j (recomputed; 0 for an empty row).
        std::fill(o_i.begin(), o_i.end(), 0.0);
        for (int64_t t = begin; t < end; ++t) {
          const auto j = static_cast<int64_t>(mask.col_idx[t]);
          for (int64_t c = 0; c < dv; ++c) {
            o_i[static_cast<std::size_t>(c)] += p[static_cast<std::size_t>(t - begin)] * v.at(b, g, j, c);
          }
        }
        double delta = 0.0;  // D_i = dO_i . O_i
        for (int64_t c = 0; c < dv; ++c) delta += d_o.at(b, h, i, c) * o_i[static_cast<std::size_t>(c)];

        double* dq_i = result.dq.data() + offset(b, h, i, shape.heads, shape.seqlen_q, d);
        for (int64_t t = begin; t < end; ++t) {
          const auto j = static_cast<int64_t>(mask.col_idx[t]);
          const double p_ij = p[static_cast<std::size_t>(t - begin)];
          const double dp_ij = dot(d_o, b, h, i, v, b, g, j);  // dP_ij = dO_i . v_j
          const double ds_ij = p_ij * (dp_ij - delta);          // dS_ij = P_ij (dP_ij - D_i)
          double* dk_j = result.dk.data() + offset(b, g, j, shape.kv_heads, shape.seqlen_k, d);
          double* dv_j = result.dv.data() + offset(b, g, j, shape.kv_heads, shape.seqlen_k, dv);
          for (int64_t c = 0; c < d; ++c) {
            dq_i[c] += scale * ds_ij * k.at(b, g, j, c);  // dQ = scale dS K
            dk_j[c] += scale * ds_ij * q.at(b, h, i, c);  // dK = scale dS^T Q
          }
          for (int64_t c = 0; c < dv; ++c) dv_j[c] += p_ij * d_o.at(b, h, i, c);  // dV = P^T dO
        }
      }
    }
  }
  return result;
}

template ForwardResult forward<int32_t>(TensorView<const double>, TensorView<const double>,
                                        TensorView<const double>, const MaskList<int32_t>&, double);
template ForwardResult forward<int64_t>(TensorView<const double>, TensorView<const double>,
                                        TensorView<const double>, const MaskList<int64_t>&, double);
template BackwardResult backward<int32_t>(TensorView<const double>, TensorView<const double>,
                                          TensorView<const double>, TensorView<const double>,
                                          const MaskList<int32_t>&, double);
template BackwardResult backward<int64_t>(TensorView<const double>, TensorView<const double>,
                                          TensorView<const double>, TensorView<const double>,
                                          const MaskList<int64_t>&, double);

}  // namespace spattn::reference
