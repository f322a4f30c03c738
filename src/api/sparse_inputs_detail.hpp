// Shared by the sparse-input entry points (sparse_inputs.cpp, sparse_inputs_plan.cpp): the input
// checks and the inputs as the schedules and predictions see them. Private to src/api.
#pragma once

#include "schedules/head_problem.hpp"
#include "schedules/input_traffic.hpp"

#include <spattn/bounds.hpp>
#include <spattn/sparse_inputs.hpp>

namespace spattn::sparse_inputs_detail {

// The counts (q: batch x heads, k and v: batch x kv_heads, kv_heads dividing heads), each input
// valid (dense: a (1, 1, seqlen, dim) view with data; CSR: structure and finite values), every
// head of one shape and the shapes agreeing; errors name "q", "k" or "v" (with the index when
// there are several heads). Returns the per-head shape.
bounds::DenseShape check_inputs(const char* where, const MultiHeadInputs& inputs);

// The input as a slow-memory view the schedules load from (dense or CSR).
schedules::SlowMatrix<const float> slow_matrix(const AttentionInput& input);

inline schedules::HeadInputs head_inputs(const AttentionInputs& inputs) {
  return {schedules::InputOperand::of(slow_matrix(inputs.q)), schedules::InputOperand::of(slow_matrix(inputs.k)),
          schedules::InputOperand::of(slow_matrix(inputs.v))};
}

}  // namespace spattn::sparse_inputs_detail
