// What a CUDA call ran (spattn/cuda.hpp returns it): decided by the host planning of the device
// tiles (src/device), which names it without the device API.
#pragma once

#include <spattn/types.hpp>

#include <cstdint>
#include <string>

namespace spattn::cuda {

enum class CudaAlgorithm {
  flash,        // block-sparse flash kernels (tiles from the planner for the device's shared memory)
  small_cache,  // the cuSPARSE path: SDDMM on the mask's CSR, segmented softmax, SpMM
};
const char* cuda_algorithm_name(CudaAlgorithm algorithm);  // "flash" / "small_cache"

// What ran: the algorithm and, for flash, the tiles and the M they were planned for.
struct DeviceRun {
  CudaAlgorithm algorithm = CudaAlgorithm::flash;
  Pass pass = Pass::forward;
  bool tensor_cores = false;      // flash: the tensor-core kernels ran (fixed 64 x 64 tiles)
  int64_t cache_words = 0;        // M fed to the planner (flash; the tensor-core kernels' words)
  int64_t shared_memory_bytes = 0;  // dynamic shared memory per block of the largest kernel
  int64_t block_q = 0, block_k = 0, dkdv_block_q = 0, dkdv_block_k = 0;
  std::string to_string() const;  // one line
};

}  // namespace spattn::cuda
