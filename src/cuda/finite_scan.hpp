// The non-finite input policy on the device (docs/api.md, "Non-finite values"): the CUDA entry
// points refuse NaN and infinity in their inputs, as the CPU ones do, before any kernel writes an
// output. One pass over the tensor on the device raises a flag; only when it is raised is the
// tensor copied back, to name the first such element with the CPU's message.
#pragma once

#include "cuda/finite_scan.cuh"

#include <spattn/tensor.hpp>

#include <cuda_runtime.h>

namespace spattn::cuda::detail {

// Launches finite_device::finite_scan_kernel over p.tensor (finite_scan_kernels.cu; the CPU
// emulation has its own).
template <typename T>
void launch_finite_scan(const finite_device::FiniteScanParams<T>& p, cudaStream_t stream);

// Throws InvalidArgument "<where>: <name>[b, h, i, j] = nan is not finite (...)" when the device
// tensor `t` holds NaN or infinity (-inf passes with `minus_infinity_allowed`: an LSE). Waits for
// `stream` to read the flag.
template <typename T>
void check_finite_on_device(const char* where, const char* name, const TensorView<const T>& t,
                            bool minus_infinity_allowed, cudaStream_t stream);

}  // namespace spattn::cuda::detail
