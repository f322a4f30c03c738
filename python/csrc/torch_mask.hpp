// A spattn::Mask held by Python (torch.classes.spattn.Mask): prepared once, reused across layers
// and calls. Generated patterns are built directly in compressed form: no seqlen_q x seqlen_k
// memory. The ops take masks by key (int[]: one for all heads, or one per query head), so that
// their schemas hold only tensors, numbers and strings: what torch.compile traces and what fake
// kernels can describe. A key is valid while its TorchMask lives.
#pragma once

#include <spattn/mask.hpp>

#include <ATen/ATen.h>
#include <torch/custom_class.h>

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::torch_ext {

struct TorchMask : torch::CustomClassHolder {
  explicit TorchMask(Mask prepared);
  ~TorchMask() override;
  TorchMask(const TorchMask&) = delete;
  TorchMask& operator=(const TorchMask&) = delete;

  // Every PATTERN-SPEC of the CLI ("sliding_window:w=128", "causal", ...; docs/patterns.md).
  static c10::intrusive_ptr<TorchMask> from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k);
  // CSR structure: crow_indices (seqlen_q + 1) and col_indices (nnz), integer tensors on the CPU;
  // validated (sorted, in range, no repeats), errors name the argument.
  static c10::intrusive_ptr<TorchMask> from_csr(const at::Tensor& crow_indices, const at::Tensor& col_indices,
                                                int64_t seqlen_q, int64_t seqlen_k);
  static c10::intrusive_ptr<TorchMask> full(int64_t seqlen_q, int64_t seqlen_k);
  // Interval structure (spattn/mask.hpp, sparse_formats/intervals.hpp): row_ptr (seqlen_q + 1),
  // begin and end (one entry per interval), integer tensors on the CPU; validated (non-empty, in
  // range, ascending without overlap), errors name the argument, the row and the values.
  static c10::intrusive_ptr<TorchMask> from_intervals(const at::Tensor& row_ptr, const at::Tensor& begin,
                                                      const at::Tensor& end, int64_t seqlen_q, int64_t seqlen_k);

  // Block structure (spattn/mask.hpp's block form) of blocks of block_m x block_n: block_row_ptr
  // (block rows + 1) and block_col_idx (stored blocks), integer tensors; partial (bool, one per
  // stored block: false = every in-range pair of the block attends); bits (bool, (partial blocks,
  // block_m, block_n): the pairs of each partial block, in order; False beyond the edges).
  // Validated (sparse_formats::validate), errors name the argument and the value.
  static c10::intrusive_ptr<TorchMask> from_blocks(const at::Tensor& block_row_ptr, const at::Tensor& block_col_idx,
                                                   const at::Tensor& partial, const at::Tensor& bits, int64_t block_m,
                                                   int64_t block_n, int64_t seqlen_q, int64_t seqlen_k);
  // A block selection: query block i attends the key blocks indices[i, :counts[i]] whole (any
  // order, no repeats). indices (query blocks, width) and counts (query blocks) are integer CPU
  // tensors, query blocks = ceil(seqlen_q / block_m). O(query blocks x width x log width).
  static c10::intrusive_ptr<TorchMask> from_block_indices(const at::Tensor& indices, const at::Tensor& counts,
                                                          int64_t block_m, int64_t block_n, int64_t seqlen_q,
                                                          int64_t seqlen_k);

  int64_t seqlen_q() const { return mask.seqlen_q(); }
  int64_t seqlen_k() const { return mask.seqlen_k(); }
  int64_t nnz() const { return mask.nnz(); }
  bool is_full() const { return mask.is_full(); }
  std::string form() const { return form_name(mask.form()); }  // "full", "intervals", "blocks", "elements"
  int64_t memory_bytes() const { return mask.memory_bytes(); }
  // The interval form as int64 tensors (copies) [row_ptr, begin, end]; empty when the mask lives
  // in another form.
  std::vector<at::Tensor> intervals() const;
  // The block form as tensors (copies) [block_size (block_m, block_n), block_row_ptr, block_col_idx,
  // partial, bits] (from_blocks' arguments); empty when the mask lives in another form.
  std::vector<at::Tensor> blocks() const;
  // The mask restricted to some query and key positions (spattn::select_mask, spattn/shard.hpp):
  // rows and cols are int64 CPU tensors of shape (count, 2) holding (begin, end) pairs. Errors
  // name Mask.select and the argument.
  c10::intrusive_ptr<TorchMask> select(const at::Tensor& rows, const at::Tensor& cols) const;
  // The key positions any of `rows` ((count, 2) int64 (begin, end) pairs) attends, ascending
  // (spattn::attended_keys): what a rank holding those queries needs. Errors name Mask.attended_keys.
  at::Tensor attended_keys(const at::Tensor& rows) const;
  // The structure as int64 tensors (copies), for to_dense() and for inspection.
  at::Tensor crow_indices() const;
  at::Tensor col_indices() const;

  // This mask's key in the process-wide registry (unique for the process's lifetime).
  int64_t key() const { return key_; }
  // The live mask with this key; InvalidArgument naming `where` and the key otherwise.
  static Mask with_key(const char* where, int64_t key);

  const Mask mask;

 private:
  int64_t key_ = 0;
};

}  // namespace spattn::torch_ext
