// One (batch, head) slice of a rank-4 attention tensor as the schedules' slow-memory matrix: a
// float view, over the tensor's own floats or its 16-bit elements (io::Storage), so the schedules
// run the same code for every element type.
#pragma once

#include <spattn/io.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <type_traits>

namespace spattn::api_detail {

template <typename T>
io::SlowMatrix<const float> head_matrix(const TensorView<const T>& t, int64_t b, int64_t h) {
  return io::SlowMatrix<const float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}
// An output (partial ordering sends const views to the overload above).
template <typename T>
io::SlowMatrix<float> head_matrix(const TensorView<T>& t, int64_t b, int64_t h) {
  static_assert(!std::is_const_v<T>, "a read-only view is a SlowMatrix<const float>");
  return io::SlowMatrix<float>(t.row(b, h, 0), t.seqlen(), t.head_dim(), t.stride[2], t.stride[3]);
}

}  // namespace spattn::api_detail
