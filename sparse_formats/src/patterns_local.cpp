// Position-based masks: full, causal, sliding / dilated / global windows, prefix LM. Each row is
// one or two key ranges (or an arithmetic progression) around pos(i) = i + seqlen_k - seqlen_q, the
// bottom-right alignment of rectangular masks (see patterns.hpp for the exact definitions).
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

#include <algorithm>

namespace sparse_formats {

using namespace patterns_internal;

template <typename Build>
auto full_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k) {
  return build("full", seqlen_q, seqlen_k,
                           [&](int64_t, auto& row) { row.range(0, seqlen_k); });
}

template <typename Index>
CsrPattern<Index> full_pattern(int64_t seqlen_q, int64_t seqlen_k) {
  return full_rows(CsrRows<Index>{}, seqlen_q, seqlen_k);
}
std::optional<IntervalPattern> patterns_internal::full_intervals(int64_t seqlen_q, int64_t seqlen_k) {
  return full_rows(IntervalRows{}, seqlen_q, seqlen_k);
}

template <typename Build>
auto causal_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k) {
  const int64_t offset = seqlen_k - seqlen_q;
  return build("causal", seqlen_q, seqlen_k,
                           [&](int64_t i, auto& row) { row.range(0, i + offset + 1); });
}

template <typename Index>
CsrPattern<Index> causal_pattern(int64_t seqlen_q, int64_t seqlen_k) {
  return causal_rows(CsrRows<Index>{}, seqlen_q, seqlen_k);
}
std::optional<IntervalPattern> patterns_internal::causal_intervals(int64_t seqlen_q, int64_t seqlen_k) {
  return causal_rows(IntervalRows{}, seqlen_q, seqlen_k);
}

template <typename Build>
auto sliding_window_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t w,
                                         bool causal) {
  check_at_least("sliding_window", "w", w, 0);
  const int64_t offset = seqlen_k - seqlen_q;
  return build("sliding_window", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t pos = i + offset;
    row.range(sat_sub(pos, w), causal ? pos + 1 : sat_add(sat_add(pos, w), 1));
  });
}

template <typename Index>
CsrPattern<Index> sliding_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w, bool causal) {
  return sliding_window_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, w, causal);
}
std::optional<IntervalPattern> patterns_internal::sliding_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w, bool causal) {
  return sliding_window_rows(IntervalRows{}, seqlen_q, seqlen_k, w, causal);
}

template <typename Build>
auto dilated_window_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t w,
                                         int64_t dilation, bool causal) {
  check_at_least("dilated_window", "w", w, 0);
  check_at_least("dilated_window", "dilation", dilation, 1);
  const int64_t offset = seqlen_k - seqlen_q;
  const int64_t reach = sat_mul(w, dilation);  // farthest attended distance
  return build("dilated_window", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t pos = i + offset;
    const int64_t residue = floor_mod(pos, dilation);  // keys j == pos (mod dilation)
    const int64_t hi = causal ? pos + 1 : sat_add(sat_add(pos, reach), 1);
    row.residues(sat_sub(pos, reach), hi, dilation, residue, residue + 1);
  });
}

template <typename Index>
CsrPattern<Index> dilated_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t dilation, bool causal) {
  return dilated_window_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, w, dilation, causal);
}
std::optional<IntervalPattern> patterns_internal::dilated_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t dilation, bool causal) {
  return dilated_window_rows(IntervalRows{}, seqlen_q, seqlen_k, w, dilation, causal);
}

template <typename Build>
auto global_window_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t g,
                                        bool causal) {
  check_at_least("global_window", "w", w, 0);
  check_at_least("global_window", "g", g, 0);
  const int64_t offset = seqlen_k - seqlen_q;
  return build("global_window", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    const int64_t pos = i + offset;
    if (!causal && pos >= 0 && pos < g) {  // a global query attends every key
      row.range(0, seqlen_k);
      return;
    }
    const int64_t lo = sat_sub(pos, w);
    const int64_t hi = causal ? pos + 1 : sat_add(sat_add(pos, w), 1);
    const int64_t global_end = causal ? std::min(g, hi) : g;  // the global keys [0, g)
    if (lo <= global_end) {
      row.range(0, std::max(global_end, hi));  // window and global keys touch: one range
    } else {
      row.range(0, global_end);
      row.range(lo, hi);
    }
  });
}

template <typename Index>
CsrPattern<Index> global_window_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t g, bool causal) {
  return global_window_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, w, g, causal);
}
std::optional<IntervalPattern> patterns_internal::global_window_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t w, int64_t g, bool causal) {
  return global_window_rows(IntervalRows{}, seqlen_q, seqlen_k, w, g, causal);
}

template <typename Build>
auto prefix_lm_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k, int64_t p) {
  check_at_least("prefix_lm", "p", p, 0);
  const int64_t offset = seqlen_k - seqlen_q;
  return build("prefix_lm", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    row.range(0, std::max(p, i + offset + 1));
  });
}

template <typename Index>
CsrPattern<Index> prefix_lm_pattern(int64_t seqlen_q, int64_t seqlen_k, int64_t p) {
  return prefix_lm_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, p);
}
std::optional<IntervalPattern> patterns_internal::prefix_lm_intervals(int64_t seqlen_q, int64_t seqlen_k, int64_t p) {
  return prefix_lm_rows(IntervalRows{}, seqlen_q, seqlen_k, p);
}

template CsrPattern<int32_t> full_pattern<int32_t>(int64_t, int64_t);
template CsrPattern<int64_t> full_pattern<int64_t>(int64_t, int64_t);
template CsrPattern<int32_t> causal_pattern<int32_t>(int64_t, int64_t);
template CsrPattern<int64_t> causal_pattern<int64_t>(int64_t, int64_t);
template CsrPattern<int32_t> sliding_window_pattern<int32_t>(int64_t, int64_t, int64_t, bool);
template CsrPattern<int64_t> sliding_window_pattern<int64_t>(int64_t, int64_t, int64_t, bool);
template CsrPattern<int32_t> dilated_window_pattern<int32_t>(int64_t, int64_t, int64_t, int64_t,
                                                             bool);
template CsrPattern<int64_t> dilated_window_pattern<int64_t>(int64_t, int64_t, int64_t, int64_t,
                                                             bool);
template CsrPattern<int32_t> global_window_pattern<int32_t>(int64_t, int64_t, int64_t, int64_t,
                                                            bool);
template CsrPattern<int64_t> global_window_pattern<int64_t>(int64_t, int64_t, int64_t, int64_t,
                                                            bool);
template CsrPattern<int32_t> prefix_lm_pattern<int32_t>(int64_t, int64_t, int64_t);
template CsrPattern<int64_t> prefix_lm_pattern<int64_t>(int64_t, int64_t, int64_t);

}  // namespace sparse_formats
