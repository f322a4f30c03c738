// Strided views of attention tensors. Every tensor is seen as rank 4, (batch, heads, seqlen,
// head_dim); a rank-2 (seqlen, head_dim) array is the view with batch = heads = 1.
#pragma once

#include <array>
#include <cstdint>
#include <type_traits>

namespace spattn {

template <typename T>
struct TensorView {
  T* data = nullptr;
  std::array<int64_t, 4> shape{0, 0, 0, 0};   // (batch, heads, seqlen, head_dim)
  std::array<int64_t, 4> stride{0, 0, 0, 0};  // in elements

  // A dense row-major (batch, heads, seqlen, head_dim) array.
  static TensorView contiguous(T* data, int64_t batch, int64_t heads, int64_t seqlen,
                               int64_t head_dim) {
    return {data,
            {batch, heads, seqlen, head_dim},
            {heads * seqlen * head_dim, seqlen * head_dim, head_dim, 1}};
  }
  // A dense row-major (seqlen, head_dim) array.
  static TensorView matrix(T* data, int64_t seqlen, int64_t head_dim) {
    return contiguous(data, 1, 1, seqlen, head_dim);
  }

  int64_t batch() const { return shape[0]; }
  int64_t heads() const { return shape[1]; }
  int64_t seqlen() const { return shape[2]; }
  int64_t head_dim() const { return shape[3]; }
  int64_t numel() const { return shape[0] * shape[1] * shape[2] * shape[3]; }

  T& at(int64_t b, int64_t h, int64_t s, int64_t d) const {
    return data[b * stride[0] + h * stride[1] + s * stride[2] + d * stride[3]];
  }
  // Pointer to row s of head (b, h); contiguous along head_dim when stride[3] == 1.
  T* row(int64_t b, int64_t h, int64_t s) const {
    return data + b * stride[0] + h * stride[1] + s * stride[2];
  }

  template <typename U = T, typename = std::enable_if_t<!std::is_const_v<U>>>
  operator TensorView<const U>() const {
    return {data, shape, stride};
  }
};

}  // namespace spattn
