// The public inputs (spattn/sparse_inputs.hpp, dense or CSR) as the schedules load them and the
// predictions price them.
#pragma once

#include "schedules/csr_inputs/input_traffic.hpp"

#include <spattn/sparse_inputs.hpp>

namespace spattn::schedules {

// The input as a slow-memory view (dense: its strided rows; CSR: its rows' entries).
SlowMatrix<const float> slow_matrix(const AttentionInput& input);

inline HeadInputs head_inputs(const AttentionInputs& inputs) {
  return {InputOperand::of(slow_matrix(inputs.q)), InputOperand::of(slow_matrix(inputs.k)),
          InputOperand::of(slow_matrix(inputs.v))};
}

}  // namespace spattn::schedules
