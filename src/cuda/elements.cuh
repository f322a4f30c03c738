// Device-side element access: fp32, fp16 and bf16 tensors read into fp32 and written back rounded
// to nearest (the 16-bit types move as their bit patterns, so no aliasing casts are needed).
#pragma once

#include <spattn/cuda.hpp>
#include <spattn/tensor.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace spattn::cuda::detail {

__device__ __forceinline__ float load_float(const float* p) { return *p; }
__device__ __forceinline__ float load_float(const half_t* p) { return __half2float(__ushort_as_half(p->bits)); }
__device__ __forceinline__ float load_float(const bfloat16_t* p) {
  return __bfloat162float(__ushort_as_bfloat16(p->bits));
}
__device__ __forceinline__ void store_float(float* p, float value) { *p = value; }
__device__ __forceinline__ void store_float(half_t* p, float value) {
  p->bits = __half_as_ushort(__float2half_rn(value));
}
__device__ __forceinline__ void store_float(bfloat16_t* p, float value) {
  p->bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
}

// A (batch, heads, seqlen, dim) strided device tensor, passed to kernels by value.
template <typename T>
struct Strided {
  T* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};

  __device__ __forceinline__ T* at(int64_t b, int64_t h, int64_t s, int64_t x) const {
    return data + b * stride[0] + h * stride[1] + s * stride[2] + x * stride[3];
  }
};

template <typename T>
Strided<T> strided(const TensorView<T>& view) {
  Strided<T> s;
  s.data = view.data;
  for (int i = 0; i < 4; ++i) s.stride[i] = view.stride[static_cast<size_t>(i)];
  return s;
}

}  // namespace spattn::cuda::detail
