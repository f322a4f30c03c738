// The emulation's stand-in for src/cuda/elements.cuh (found first on the include path): the same
// loads and stores, through the host conversions of src/device/elements.cpp (round to nearest even,
// as __float2half_rn and __float2bfloat16_rn).
#pragma once

#include "cuda/strided.hpp"

#include <spattn/cuda.hpp>

namespace spattn::cuda::detail {

inline float load_float(const float* p) { return *p; }
inline float load_float(const half_t* p) { return to_float(*p); }
inline float load_float(const bfloat16_t* p) { return to_float(*p); }
inline void store_float(float* p, float value) { *p = value; }
inline void store_float(half_t* p, float value) { *p = to_half(value); }
inline void store_float(bfloat16_t* p, float value) { *p = to_bfloat16(value); }

}  // namespace spattn::cuda::detail
