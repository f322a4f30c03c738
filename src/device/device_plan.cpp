#include "device/device_plan.hpp"

#include "device/mma_layout.hpp"

#include <spattn/error.hpp>

namespace spattn::device {

FlashCall flash_call(const DeviceShape& shape, int64_t smem_words, Pass pass, FlashMasking masking,
                     ElementType type, bool tensor_cores) {
  FlashCall call;
  const int dim = mma_dim(shape.head_dim, shape.head_dim_v);
  if (tensor_cores && type != ElementType::fp32 && dim != 0) {
    const int64_t bytes = mma_layout(dim, pass).bytes;
    if (bytes <= 4 * smem_words) {
      call.tiles.block_q = call.tiles.block_k = call.tiles.dkdv_block_q = call.tiles.dkdv_block_k = kMmaTile;
      call.cache_words = call.smem_words = (bytes + 3) / 4;
      call.mma_dim = dim;
      return call;
    }
  }
  const DeviceFlashTiles planned = device_flash_tiles(shape.head(), smem_words, pass, masking);
  call.tiles = planned.tiles;
  call.cache_words = planned.cache_words;
  call.smem_words = planned.smem_words;
  return call;
}

cuda::DeviceRun flash_run(Pass pass, const FlashCall& call) {
  cuda::DeviceRun run;
  run.algorithm = cuda::CudaAlgorithm::flash;
  run.pass = pass;
  run.tensor_cores = call.mma_dim != 0;
  run.cache_words = call.cache_words;
  run.shared_memory_bytes = 4 * call.smem_words;
  run.block_q = call.tiles.block_q;
  run.block_k = call.tiles.block_k;
  run.dkdv_block_q = call.tiles.dkdv_block_q;
  run.dkdv_block_k = call.tiles.dkdv_block_k;
  return run;
}

}  // namespace spattn::device
