// What the CUDA flash path runs for a call, decided on the host (plain C++, so that CPU builds and
// tests plan CUDA calls too): the tensor-core kernels with their fixed 64 x 64 tiles for fp16 / bf16
// inputs with head dims up to 128 whose layout fits the shared-memory budget, else the fp32 kernels
// with the planner's tiles for the budget (device_tiles.hpp).
#pragma once

#include "device/device_tiles.hpp"

#include <spattn/device_run.hpp>
#include <spattn/elements.hpp>

#include <cstdint>

namespace spattn::device {

struct FlashCall {
  FlashTiles tiles;
  int64_t cache_words = 0;  // M the tiles were chosen for
  int64_t smem_words = 0;   // dynamic shared memory of the pass's largest kernel, in words
  int mma_dim = 0;          // the tensor-core kernels' padded head dim; 0: the fp32 kernels
};
FlashCall flash_call(const DeviceShape& shape, int64_t smem_words, Pass pass, FlashMasking masking,
                     ElementType type, bool tensor_cores);

// The DeviceRun that reports a flash call.
cuda::DeviceRun flash_run(Pass pass, const FlashCall& call);

}  // namespace spattn::device
