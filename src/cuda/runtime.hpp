// Internal helpers of the CUDA backend shared by its translation units.
#pragma once

#include <cuda_runtime.h>

namespace spattn::cuda::detail {

// Throws RuntimeError "spattn::cuda::<what>: no CUDA device: ..." when no device is usable.
void require_device(const char* what);

inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace spattn::cuda::detail
