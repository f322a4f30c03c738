// Attention over part of the queries or keys, and the merge of partial results: what context
// parallelism (the sequence split over ranks) needs from the library.
//
//   // Keys split in two parts; every query attends over both.
//   const std::vector<spattn::IndexRange> all_rows{{0, n}};
//   auto mask_a = spattn::select_mask(mask, all_rows, {{0, split}});
//   auto mask_b = spattn::select_mask(mask, all_rows, {{split, n}});
//   spattn::attention_forward(q, k_a, v_a, o, lse, mask_a, options);            // keys [0, split)
//   spattn::attention_forward(q, k_b, v_b, o_b, lse_b, mask_b, options);        // keys [split, n)
//   spattn::merge_attention_partials(o, lse, o_b, lse_b);                       // o, lse over all keys
//
// The backward needs no merge: attention_backward over one key part, given the GLOBAL o and lse
// (the merged ones), gives that part's dk and dv exactly and a partial dq; the parts' dq add up
// to the full dq (docs/api.md, "Shards: attention over part of the keys").
#pragma once

#include <spattn/mask.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <vector>

namespace spattn {

// The positions [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// The mask restricted to some query positions (rows: the concatenation of the row ranges, in the
// order given) and key positions (cols: the concatenation of the col ranges, in the order given):
// a (sum of row lengths) x (sum of col lengths) Mask whose pair (i, j) attends iff the global pair
// (i-th selected row, j-th selected col) attends.
//
// Every range must satisfy 0 <= begin <= end <= seqlen (seqlen_q for rows, seqlen_k for cols), and
// the ranges of one side must not overlap; empty ranges are allowed anywhere. Errors are
// InvalidArgument naming select_mask, the argument, the index and the values
// ("select_mask: cols[2] = [5, 9) must satisfy 0 <= begin <= end <= seqlen_k = 8").
//
// A full mask gives a full mask (Mask::full: no CSR is built). Otherwise the cost is, per selected
// row, its columns inside the col ranges plus a binary search per col range it skips to; output
// rows have their columns ascending even when the col ranges are given in decreasing order (a
// row is then sorted).
Mask select_mask(const Mask& mask, const std::vector<IndexRange>& rows, const std::vector<IndexRange>& cols);

// The key positions that any of the given query positions attends, ascending, each once: what a
// process holding those queries needs of the keys. Rows as in select_mask (same checks and
// messages, naming attended_keys). A full mask gives every key when a row is given. O(the rows'
// attended pairs + seqlen_k) time and O(seqlen_k) memory: the mask is not copied.
std::vector<int64_t> attended_keys(const Mask& mask, const std::vector<IndexRange>& rows);

// Merges a partial attention result (o_part, lse_part), computed over some keys, into (o, lse),
// computed over keys disjoint from those, in place: afterwards (o, lse) is attention over the
// union. o, o_part: (batch, heads, seqlen, head_dim_v); lse, lse_part: (batch, heads, seqlen, 1):
// the shapes attention_forward writes; any strides.
//
// Per row, in float32: m = max(lse, lse_part), w = exp(lse - m), w_part = exp(lse_part - m),
// o = (w o + w_part o_part) / (w + w_part), lse = m + log(w + w_part). A side with lse = -inf is
// empty (it attended no key): with both empty, o = 0 and lse = -inf (no NaN); with one empty, o
// and lse become the other side's, bit for bit.
//
// Refused with InvalidArgument naming merge_attention_partials, the argument, the element and the
// value: shapes that differ, an lse or lse_part of +inf or NaN, a non-finite o or o_part value,
// and o or lse sharing memory with each other or with o_part or lse_part. Everything is checked
// before anything is written: a refused call leaves o and lse as they were.
void merge_attention_partials(TensorView<float> o, TensorView<float> lse, TensorView<const float> o_part,
                              TensorView<const float> lse_part);

}  // namespace spattn
