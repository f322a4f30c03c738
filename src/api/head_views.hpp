// One (batch, head) slice of a rank-4 attention tensor as the schedules' slow-memory matrix.
#pragma once

#include <spattn/io.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>

namespace spattn::api_detail {

inline io::SlowMatrix<const float> head_matrix(const TensorView<const float>& t, int64_t b, int64_t h) {
  return io::SlowMatrix<const float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}
inline io::SlowMatrix<float> head_matrix(const TensorView<float>& t, int64_t b, int64_t h) {
  return io::SlowMatrix<float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}

}  // namespace spattn::api_detail
