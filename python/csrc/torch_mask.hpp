// A spattn::Mask held by Python (torch.classes.spattn.Mask): prepared once, reused across layers
// and calls, passed to the ops as a list (one for all heads, or one per query head). Generated
// patterns are built directly in compressed form: no seqlen_q x seqlen_k memory.
#pragma once

#include <spattn/mask.hpp>

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cstdint>
#include <string>

namespace spattn::torch_ext {

struct TorchMask : torch::CustomClassHolder {
  explicit TorchMask(Mask prepared) : mask(std::move(prepared)) {}

  // Every PATTERN-SPEC of the CLI ("sliding_window:w=128", "causal", ...; docs/patterns.md).
  static c10::intrusive_ptr<TorchMask> from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k);
  // CSR structure: crow_indices (seqlen_q + 1) and col_indices (nnz), integer tensors on the CPU;
  // validated (sorted, in range, no repeats), errors name the argument.
  static c10::intrusive_ptr<TorchMask> from_csr(const at::Tensor& crow_indices, const at::Tensor& col_indices,
                                                int64_t seqlen_q, int64_t seqlen_k);
  static c10::intrusive_ptr<TorchMask> full(int64_t seqlen_q, int64_t seqlen_k);

  int64_t seqlen_q() const { return mask.seqlen_q(); }
  int64_t seqlen_k() const { return mask.seqlen_k(); }
  int64_t nnz() const { return mask.nnz(); }
  bool is_full() const { return mask.is_full(); }
  // The structure as int64 tensors (copies), for to_dense() and for inspection.
  at::Tensor crow_indices() const;
  at::Tensor col_indices() const;

  Mask mask;
};

}  // namespace spattn::torch_ext
