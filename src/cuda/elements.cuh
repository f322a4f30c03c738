// Device-side element access: fp32, fp16 and bf16 tensors read into fp32 and written back rounded
// to nearest (the 16-bit types move as their bit patterns, so no aliasing casts are needed), and
// the strided tensor type (cuda/strided.hpp).
#pragma once

#include "cuda/strided.hpp"

#include <spattn/cuda.hpp>

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

}  // namespace spattn::cuda::detail
