// The public inputs (spattn/sparse_inputs.hpp, dense or CSR) as the schedules load them and the
// predictions price them.
#pragma once

#include "schedules/csr_inputs/input_traffic.hpp"

#include <spattn/inputs.hpp>

namespace spattn::schedules {

// The input as a slow-memory view (dense: its strided rows; CSR: its rows' entries).
SlowMatrix<const float> slow_matrix(const AttentionInput& input);

// Its lines counted in lines of `line_words` words.
inline HeadInputs head_inputs(const AttentionInputs& inputs, int64_t line_words) {
  return {InputOperand::of(slow_matrix(inputs.q), line_words), InputOperand::of(slow_matrix(inputs.k), line_words),
          InputOperand::of(slow_matrix(inputs.v), line_words)};
}

}  // namespace spattn::schedules
