// Shared by the sparse-input entry points (sparse_inputs.cpp, sparse_inputs_plan.cpp): the input
// checks and the inputs as the schedules and predictions see them. Private to src/api.
#pragma once

#include "schedules/head_problem.hpp"
#include "schedules/input_traffic.hpp"

#include <spattn/bounds.hpp>
#include <spattn/sparse_inputs.hpp>

namespace spattn::sparse_inputs_detail {

// Each input valid (dense: a (1, 1, seqlen, dim) view with data; CSR: structure and finite values,
// errors naming "q", "k" or "v") and the shapes agreeing; returns the per-head shape.
bounds::DenseShape check_inputs(const char* where, const AttentionInputs& inputs);

// The input as a slow-memory view the schedules load from (dense or CSR).
schedules::SlowMatrix<const float> slow_matrix(const AttentionInput& input);

inline schedules::HeadInputs head_inputs(const AttentionInputs& inputs) {
  return {schedules::InputOperand::of(slow_matrix(inputs.q)), schedules::InputOperand::of(slow_matrix(inputs.k)),
          schedules::InputOperand::of(slow_matrix(inputs.v))};
}

}  // namespace spattn::sparse_inputs_detail
