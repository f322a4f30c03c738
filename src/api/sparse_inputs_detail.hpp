// Shared by the sparse-input entry points (sparse_inputs.cpp, sparse_inputs_plan.cpp): the input
// checks and the inputs as the schedules and predictions see them. Private to src/api.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "schedules/csr_inputs/input_traffic.hpp"

#include <spattn/bounds.hpp>
#include <spattn/sparse_inputs.hpp>

#include <vector>

namespace spattn::sparse_inputs_detail {

// The counts (q: batch x heads, k and v: batch x kv_heads, kv_heads dividing heads), each input
// valid (dense: a (1, 1, seqlen, dim) view with data; CSR: structure and finite values), every
// head of one shape and the shapes agreeing; errors name "q", "k" or "v" (with the index when
// there are several heads). Returns the per-head shape.
bounds::DenseShape check_inputs(const char* where, const MultiHeadInputs& inputs);

// One mask for all heads (`masks` of one, named "mask") or one per query head (`per_head`, named
// "masks[h]"), each seqlen_q x seqlen_k: attention.hpp's checks and messages (api/checks.hpp).
void check_masks(const char* where, const std::vector<Mask>& masks, bool per_head, const MultiHeadInputs& inputs,
                 const bounds::DenseShape& shape);

// Query head h's mask (the shared one when there is one).
inline const Mask& head_mask(const std::vector<Mask>& masks, int64_t h) {
  return masks.size() == 1 ? masks.front() : masks[static_cast<size_t>(h)];
}

// Every head's plan, the inputs and masks already checked: each (batch, query head) priced with
// its own inputs and mask, the sums, and one algorithm for all heads (sparse_inputs_plan.cpp).
Plan plan_heads(const bounds::DenseShape& shape, const MultiHeadInputs& inputs, const std::vector<Mask>& masks,
                int64_t cache_words, Pass pass, Algorithm requested);

// The input as a slow-memory view the schedules load from (dense or CSR).
schedules::SlowMatrix<const float> slow_matrix(const AttentionInput& input);

inline schedules::HeadInputs head_inputs(const AttentionInputs& inputs) {
  return {schedules::InputOperand::of(slow_matrix(inputs.q)), schedules::InputOperand::of(slow_matrix(inputs.k)),
          schedules::InputOperand::of(slow_matrix(inputs.v))};
}

}  // namespace spattn::sparse_inputs_detail
