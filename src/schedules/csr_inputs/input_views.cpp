// The public inputs as slow-memory views (input_views.hpp).
#include "schedules/csr_inputs/input_views.hpp"

namespace spattn::schedules {

SlowMatrix<const float> slow_matrix(const AttentionInput& input) {
  if (input.is_csr()) return SlowMatrix<const float>::csr(input.csr_view());
  const auto& t = input.dense_view();
  return SlowMatrix<const float>(t.seqlen() > 0 ? t.row(0, 0, 0) : t.data, t.seqlen(), t.head_dim(),
                                 t.stride[2], t.stride[3]);
}

}  // namespace spattn::schedules
