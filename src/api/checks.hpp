// The argument checks of the public attention entry points (attention.hpp): every message names
// the entry point, the argument and the values ("attention_backward: d_o has seqlen 63, q has 64").
// They run before anything is planned or written.
#pragma once

#include <spattn/attention.hpp>
#include <spattn/bounds.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace spattn::api_detail {

// The q, k, v checks shared by both passes (heads a multiple of k's heads: grouped-query
// attention); returns the per-head shape.
bounds::DenseShape check_qkv(const char* where, const TensorView<const float>& q,
                             const TensorView<const float>& k, const TensorView<const float>& v);

// `t` is rank 4 with q's batch, heads and seqlen (the outputs and the per-query inputs).
void check_per_query(const char* where, const char* name, const TensorView<const float>& t,
                     const TensorView<const float>& q);
void check_per_query(const char* where, const char* name, const TensorView<float>& t,
                     const TensorView<const float>& q);
// `t`'s head_dim equals v's (o and d_o).
void check_value_dim(const char* where, const char* name, int64_t head_dim, const TensorView<const float>& v);
// lse has q's batch, heads and seqlen and a last extent of 1.
void check_lse(const char* where, const TensorView<const float>& lse, const TensorView<const float>& q);
void check_lse(const char* where, const TensorView<float>& lse, const TensorView<const float>& q);
// A gradient has exactly the shape of its input.
void check_gradient(const char* where, const char* name, const TensorView<float>& grad,
                    const TensorView<const float>& input);

// The call's masks (HeadMasks::resolve): one for all heads (named "mask") or one per query head
// (named "masks[h]", as many as q's heads), each seqlen_q x seqlen_k.
std::vector<Mask> check_masks(const char* where, const HeadMasks& masks, int64_t heads, int64_t seqlen_q,
                              int64_t seqlen_k);

// A previewed call's shape (plan_attention): no negative size, heads a multiple of kv_heads, the
// messages of check_qkv. Returns the per-head shape (head_dim_v 0 taken as head_dim).
bounds::DenseShape check_shape(const char* where, const AttentionShape& shape);

// The non-finite policy (reference/finite_values.hpp): q, k, v (and o, d_o, lse in the backward)
// hold no NaN or infinity; lse may hold -inf (a row that attends nothing).
void check_finite_inputs(const char* where, const TensorView<const float>& q, const TensorView<const float>& k,
                         const TensorView<const float>& v);
void check_finite_backward(const char* where, const TensorView<const float>& o, const TensorView<const float>& lse,
                           const TensorView<const float>& d_o);

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
// options.line_words resolved (io::plan_line_words: 0 takes the ledger's, else 16).
int64_t resolve_line_words(const char* where, const AttentionOptions& options);

// The thread count options.threads stands for: itself when positive, else
// std::thread::hardware_concurrency() (at least 1). Throws InvalidArgument (naming `where`)
// outside [0, kMaxThreads].
int resolve_threads(const char* where, int requested);

}  // namespace spattn::api_detail
