// The inputs of attention with sparse Q, K, V (spattn/sparse_inputs.hpp runs them): each input a
// dense matrix view or a CSR matrix, one per head. Part of the shared vocabulary
// (docs/architecture.md, "Layers"): the planner and the schedules read them too.
#pragma once

#include <spattn/tensor.hpp>

#include <sparse_formats/csr.hpp>

#include <cstdint>
#include <vector>

namespace spattn {

using CsrInput = sparse_formats::CsrMatrixView<int64_t, float>;

// One (seqlen, head_dim) input: a dense matrix view (batch = heads = 1) or a CSR matrix. The
// arrays are the caller's and must outlive the call.
class AttentionInput {
 public:
  AttentionInput() = default;
  static AttentionInput dense(TensorView<const float> matrix);
  static AttentionInput csr(const CsrInput& matrix);

  bool is_csr() const { return is_csr_; }
  int64_t seqlen() const;
  int64_t head_dim() const;
  int64_t nnz() const;  // stored entries; seqlen * head_dim for a dense input
  const TensorView<const float>& dense_view() const { return dense_; }
  const CsrInput& csr_view() const { return csr_; }

 private:
  bool is_csr_ = false;
  TensorView<const float> dense_;
  CsrInput csr_;
};

struct AttentionInputs {
  AttentionInput q;  // (seqlen_q, head_dim)
  AttentionInput k;  // (seqlen_k, head_dim)
  AttentionInput v;  // (seqlen_k, head_dim_v)
  bool any_csr() const { return q.is_csr() || k.is_csr() || v.is_csr(); }
  // The project's convention (docs/sparse.md): (nnz(Q) + nnz(K)) / 2.
  double z_input() const;
};

// Q, K, V of every head: q[b * heads + h], k[b * kv_heads + g], v[b * kv_heads + g].
struct MultiHeadInputs {
  MultiHeadInputs() = default;
  // Empty lists, to be filled with batch x heads inputs for q and batch x kv_heads for k and v.
  MultiHeadInputs(int64_t batch_count, int64_t head_count, int64_t kv_head_count)
      : batch(batch_count), heads(head_count), kv_heads(kv_head_count) {}
  // One head's inputs (batch = heads = kv_heads = 1): implicit, so a one-head call passes them.
  MultiHeadInputs(const AttentionInputs& one);  // NOLINT(google-explicit-constructor)

  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;  // divides heads
  std::vector<AttentionInput> q, k, v;
  // Query head (b, h) with its group's K and V.
  AttentionInputs head(int64_t b, int64_t h) const;
};

}  // namespace spattn
