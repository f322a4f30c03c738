// Force-included (-include, CMakeLists.txt) into every file of the CPU emulation of the flash
// kernels: the CUDA headers for their types, then the kernel keywords made plain C++ and a block of one
// thread (blockDim.x = 1), so that each "for (i = threadIdx.x; i < n; i += blockDim.x)" phase of a
// kernel runs whole and __syncthreads() is a no-op. Races between threads are not modelled: the
// barriers are checked by reading (docs/cuda.md); indexing, tails, lists, masks and math are.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

#define SPATTN_FLASH_EMULATION 1
#undef __global__
#undef __device__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)

inline dim3 emulated_block_index(0, 0, 0);
inline const dim3 emulated_thread_index(0, 0, 0), emulated_block_dim(1, 1, 1), emulated_grid_dim(1, 1, 1);
#define threadIdx emulated_thread_index
#define blockIdx emulated_block_index
#define blockDim emulated_block_dim
#define gridDim emulated_grid_dim
inline void __syncthreads() {}
