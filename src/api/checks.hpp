// The argument checks of the public attention entry points (attention.hpp): every message names
// the entry point, the argument and the values ("attention_backward: d_o has seqlen 63, q has 64").
// They run before anything is planned or written.
#pragma once

#include "reference/finite_values.hpp"

#include <spattn/attention.hpp>
#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

namespace spattn::api_detail {

// The tensor checks take views of any element type (float, half_t, bfloat16_t; the templates
// below); lse is float whatever the others are.

// Every extent >= 0, and data unless there are no elements.
template <typename T>
void check_rank4(const char* where, const char* name, const TensorView<T>& t) {
  for (int i = 0; i < 4; ++i) {
    if (t.shape[static_cast<size_t>(i)] < 0) {
      fail(where, ": ", name, " has a negative extent ", t.shape[static_cast<size_t>(i)], " in dimension ", i);
    }
  }
  if (t.data == nullptr && t.numel() > 0) fail(where, ": ", name, " has no data but ", t.numel(), " elements");
}

// a's extent a_dim equals b's extent b_dim ("<a> has <what> x, <b> has y").
template <typename A, typename B>
void check_same(const char* where, const char* what, const char* a_name, const TensorView<A>& a, int a_dim,
                const char* b_name, const TensorView<B>& b, int b_dim) {
  const int64_t x = a.shape[static_cast<size_t>(a_dim)];
  const int64_t y = b.shape[static_cast<size_t>(b_dim)];
  if (x != y) fail(where, ": ", a_name, " has ", what, " ", x, ", ", b_name, " has ", y);
}

// The q, k, v checks shared by both passes (heads a multiple of k's heads: grouped-query
// attention); returns the per-head shape.
template <typename T>
bounds::DenseShape check_qkv(const char* where, const TensorView<const T>& q, const TensorView<const T>& k,
                             const TensorView<const T>& v) {
  check_rank4(where, "q", q);
  check_rank4(where, "k", k);
  check_rank4(where, "v", v);
  check_same(where, "batch", "k", k, 0, "q", q, 0);
  check_same(where, "batch", "v", v, 0, "q", q, 0);
  check_same(where, "heads", "v", v, 1, "k", k, 1);
  check_same(where, "head_dim", "k", k, 3, "q", q, 3);
  check_same(where, "seqlen", "v", v, 2, "k", k, 2);
  if (k.heads() == 0 ? q.heads() != 0 : q.heads() % k.heads() != 0) {
    fail(where, ": q has ", q.heads(), " heads, not a multiple of k's ", k.heads(), " heads");
  }
  return {q.seqlen(), k.seqlen(), q.head_dim(), v.head_dim()};
}

// `t` is rank 4 with q's batch, heads and seqlen (the outputs and the per-query inputs).
template <typename T, typename Q>
void check_per_query(const char* where, const char* name, const TensorView<T>& t, const TensorView<Q>& q) {
  check_rank4(where, name, t);
  check_same(where, "batch", name, t, 0, "q", q, 0);
  check_same(where, "heads", name, t, 1, "q", q, 1);
  check_same(where, "seqlen", name, t, 2, "q", q, 2);
}

// `name`'s head_dim equals v's (o and d_o).
template <typename V>
void check_value_dim(const char* where, const char* name, int64_t head_dim, const TensorView<V>& v) {
  if (head_dim != v.head_dim()) fail(where, ": ", name, " has head_dim ", head_dim, ", v has ", v.head_dim());
}

// lse has q's batch, heads and seqlen and a last extent of 1.
template <typename L, typename Q>
void check_lse(const char* where, const TensorView<L>& lse, const TensorView<Q>& q) {
  static_assert(std::is_same_v<std::remove_const_t<L>, float>, "lse is float for every element type");
  check_per_query(where, "lse", lse, q);
  if (lse.head_dim() != 1) fail(where, ": lse must have last extent 1, has ", lse.head_dim());
}

// A gradient has exactly the shape of its input.
template <typename T>
void check_gradient(const char* where, const char* name, const TensorView<T>& grad, const TensorView<const T>& input) {
  check_rank4(where, name, grad);
  for (int dim = 0; dim < 4; ++dim) {
    if (grad.shape[static_cast<size_t>(dim)] != input.shape[static_cast<size_t>(dim)]) {
      fail(where, ": ", name, " has extent ", grad.shape[static_cast<size_t>(dim)], " in dimension ", dim,
           ", its input has ", input.shape[static_cast<size_t>(dim)]);
    }
  }
}

// The call's masks (HeadMasks::resolve): one for all heads (named "mask") or one per query head
// (named "masks[h]", as many as q's heads), each seqlen_q x seqlen_k.
std::vector<Mask> check_masks(const char* where, const HeadMasks& masks, int64_t heads, int64_t seqlen_q,
                              int64_t seqlen_k);

// A previewed call's shape (plan_attention): no negative size, heads a multiple of kv_heads, the
// messages of check_qkv. Returns the per-head shape (head_dim_v 0 taken as head_dim).
bounds::DenseShape check_shape(const char* where, const AttentionShape& shape);

// One tensor of check_finite_tensors: its rows (reference::flat_rows) and elements, a scan of rows
// [begin, end) for the first one holding an element the policy refuses (or end), and the report
// that throws the message naming that element.
struct FiniteScan {
  int64_t rows = 0;
  int64_t elements = 0;
  std::function<int64_t(int64_t, int64_t)> first_refused;
  std::function<void()> report;
};
template <typename T>
FiniteScan finite_scan(const char* where, const char* name, const TensorView<const T>& t,
                       bool minus_infinity_allowed = false) {
  return {reference::flat_rows(t), t.data == nullptr ? 0 : t.numel(),
          [t, minus_infinity_allowed](int64_t begin, int64_t end) {
            return reference::first_non_finite_row(t, begin, end, minus_infinity_allowed);
          },
          [where, name, t, minus_infinity_allowed] { reference::check_finite(where, name, t, minus_infinity_allowed); }};
}

// The non-finite policy (reference/finite_values.hpp) over a call's inputs: q, k, v (and o, d_o,
// lse in the backward) hold no NaN or infinity; lse may hold -inf (a row that attends nothing).
// Each tensor's rows are split over `threads` workers when the tensors hold enough elements to
// pay for starting them (the scan runs before anything else of the call, on every call); the
// error names the first refused element of the first tensor, in the order given, that has one,
// whatever the split.
void check_finite_tensors(const std::vector<FiniteScan>& scans, int threads);

// Outputs must not share memory with themselves (strides that map two elements to one address),
// with each other or with an input: a call would otherwise read what it already overwrote. A view
// is self-overlapping unless, its dimensions sorted by |stride|, each |stride| exceeds the span of
// the smaller ones (sufficient; exotic interleavings that satisfy no such order are refused too).
struct NamedView {
  const char* name;
  const void* data;
  std::array<int64_t, 4> shape;
  std::array<int64_t, 4> stride;
  int64_t element_bytes;
};
template <typename T>
NamedView named(const char* name, const TensorView<T>& t) {
  return {name, t.data, t.shape, t.stride, static_cast<int64_t>(sizeof(T))};
}
void check_outputs_apart(const char* where, const std::vector<NamedView>& outputs, const std::vector<NamedView>& inputs);

double resolve_scale(const char* where, const AttentionOptions& options, int64_t head_dim);
int64_t resolve_cache(const char* where, const AttentionOptions& options);
// options.line_words resolved (io::plan_line_words: 0 takes the ledger's, else a 64-byte line of
// `element`s: 16 fp32, 32 fp16 / bf16).
int64_t resolve_line_words(const char* where, const AttentionOptions& options, ElementType element);

// The thread count options.threads stands for: itself when positive, else
// std::thread::hardware_concurrency() (at least 1). Throws InvalidArgument (naming `where`)
// outside [0, kMaxThreads].
int resolve_threads(const char* where, int requested);

}  // namespace spattn::api_detail
