// Launching one thread block per outer tile and head (the flash and tensor-core kernels): the grid
// checked against the device's limits, the kernel's dynamic shared-memory limit raised to what it
// takes, the launch and its check. Only for .cu files (the launch syntax needs nvcc).
#pragma once

#include "cuda/check.hpp"
#include "schedules/common/tile_math.hpp"

#include <spattn/error.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace spattn::cuda::detail {

// grid (outer tiles, batch x heads): checked against the device's limits before launching.
inline dim3 tile_grid(int64_t tiles, int64_t heads, const char* kernel) {
  if (tiles > 0x7fffffff || heads > 65535) {
    throw RuntimeError(std::string("cuda flash: ") + kernel + " needs a grid of " + std::to_string(tiles) +
                       " x " + std::to_string(heads) + " blocks; the limit is 2^31 - 1 x 65535 (batch x heads)");
  }
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(heads));
}

// One block of `threads` per outer tile (rows / block of them) and head, `bytes` of dynamic shared
// memory. Nothing is launched for an empty grid.
template <typename Params>
void launch_tiles(void (*kernel)(Params), const Params& params, int64_t rows, int64_t block, int64_t heads,
                  int threads, int64_t bytes, cudaStream_t stream, const char* name) {
  const int64_t tiles = tile_math::num_tiles(rows, block);
  if (tiles == 0 || heads == 0) return;
  const dim3 grid = tile_grid(tiles, heads, name);
  SPATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<grid, threads, static_cast<size_t>(bytes), stream>>>(params);
  check_cuda(cudaGetLastError(), name, __FILE__, __LINE__);
}

}  // namespace spattn::cuda::detail
