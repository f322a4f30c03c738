// The device half of the non-finite input check (finite_scan.hpp): one pass over a strided tensor
// that raises a flag when an element is NaN or infinite. Included by finite_scan_kernels.cu and by
// the CPU emulation (tests/cuda/emulation), which runs it as plain C++.
#pragma once

#include "cuda/elements.cuh"
#include "schedules/common/tile_math.hpp"  // negative_infinity

#include <cstdint>

namespace spattn::cuda::finite_device {

template <typename T>
struct FiniteScanParams {
  detail::Strided<const T> tensor;
  int64_t shape[4] = {0, 0, 0, 0};
  bool minus_infinity_allowed = false;  // an LSE: -inf is a row that attends nothing
  int* found = nullptr;                 // set to 1 when an element is refused; never cleared here
};

// Grid-stride over the elements in (b, h, s, x) order. Every thread that meets a refused element
// stores 1: the same value, so the race is benign and no atomics are needed.
template <typename T>
__global__ void finite_scan_kernel(FiniteScanParams<T> p) {
  const int64_t total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int64_t rest = i;
    const int64_t x = rest % p.shape[3];
    rest /= p.shape[3];
    const int64_t s = rest % p.shape[2];
    rest /= p.shape[2];
    const int64_t h = rest % p.shape[1];
    const int64_t b = rest / p.shape[1];
    const float value = detail::load_float(p.tensor.at(b, h, s, x));
    // value - value is 0 exactly for finite values, NaN for NaN and for either infinity.
    const bool finite = value - value == 0.0f;
    if (!finite && !(p.minus_infinity_allowed && value == tile_math::negative_infinity())) *p.found = 1;
  }
}

}  // namespace spattn::cuda::finite_device
