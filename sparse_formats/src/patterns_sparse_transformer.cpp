// The strided and fixed patterns of the Sparse Transformer (Child et al. 2019). Each row is a key
// range around pos(i) plus keys in fixed residue classes, described to the row builder as pieces so
// that counting a row costs O(1) pieces (see patterns.hpp for the exact definitions).
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

#include <algorithm>

namespace sparse_formats {

using namespace patterns_internal;

template <typename Build>
auto strided_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t stride, bool causal) {
  check_at_least("strided", "stride", stride, 1);
  const int64_t offset = seqlen_k - seqlen_q;
  return build("strided", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t pos = i + offset;
    const int64_t residue = floor_mod(pos, stride);     // the column class j == pos (mod stride)
    const int64_t local_lo = sat_sub(pos, stride - 1);  // |pos - j| < stride
    const int64_t local_hi = causal ? pos + 1 : sat_add(pos, stride);
    row.residues(0, local_lo, stride, residue, residue + 1);
    row.range(local_lo, local_hi);
    if (!causal) row.residues(local_hi, seqlen_k, stride, residue, residue + 1);
  });
}

template <typename Index>
CsrPattern<Index> strided_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, bool causal) {
  return strided_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, stride, causal);
}
std::optional<IntervalPattern> patterns_internal::strided_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, bool causal) {
  return strided_rows(IntervalRows{}, seqlen_q, seqlen_k, stride, causal);
}

template <typename Build>
auto fixed_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t stride, int64_t c,
                                bool causal) {
  check_at_least("fixed", "stride", stride, 1);
  check_at_least("fixed", "c", c, 0);
  if (c > stride) fail("fixed: c = ", c, " must be <= stride = ", stride);
  const int64_t offset = seqlen_k - seqlen_q;
  return build("fixed", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t pos = i + offset;
    const int64_t block_begin = floor_div(pos, stride) * stride;  // the query's own stride-block
    const int64_t block_end = sat_add(block_begin, stride);
    const int64_t hi = causal ? std::min(block_end, pos + 1) : block_end;
    // Summary keys (j mod stride >= stride - c) of earlier blocks, the own block, later summaries.
    if (c > 0) row.residues(0, block_begin, stride, stride - c, stride);
    row.range(block_begin, hi);
    if (c > 0 && !causal) row.residues(block_end, seqlen_k, stride, stride - c, stride);
  });
}

template <typename Index>
CsrPattern<Index> fixed_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, int64_t c, bool causal) {
  return fixed_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, stride, c, causal);
}
std::optional<IntervalPattern> patterns_internal::fixed_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t stride, int64_t c, bool causal) {
  return fixed_rows(IntervalRows{}, seqlen_q, seqlen_k, stride, c, causal);
}

template CsrPattern<int32_t> strided_pattern<int32_t>(int64_t, int64_t, int64_t, bool);
template CsrPattern<int64_t> strided_pattern<int64_t>(int64_t, int64_t, int64_t, bool);
template CsrPattern<int32_t> fixed_pattern<int32_t>(int64_t, int64_t, int64_t, int64_t, bool);
template CsrPattern<int64_t> fixed_pattern<int64_t>(int64_t, int64_t, int64_t, int64_t, bool);

}  // namespace sparse_formats
