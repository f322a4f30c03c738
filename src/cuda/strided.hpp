// A (batch, heads, seqlen, dim) strided tensor passed to kernels by value: the element address
// arithmetic of every device kernel, host-callable too (tests/cuda_emulation runs the kernels on
// the CPU with it).
#pragma once

#include "schedules/common/tile_math.hpp"  // SPATTN_HD

#include <spattn/tensor.hpp>

#include <cstddef>
#include <cstdint>

namespace spattn::cuda::detail {

template <typename T>
struct Strided {
  T* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};

  SPATTN_HD inline T* at(int64_t b, int64_t h, int64_t s, int64_t x) const {
    return data + b * stride[0] + h * stride[1] + s * stride[2] + x * stride[3];
  }
};

template <typename T>
Strided<T> strided(const TensorView<T>& view) {
  Strided<T> s;
  s.data = view.data;
  for (int i = 0; i < 4; ++i) s.stride[i] = view.stride[static_cast<std::size_t>(i)];
  return s;
}

}  // namespace spattn::cuda::detail
