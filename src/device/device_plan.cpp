#include "device/device_plan.hpp"

#include "device/mma_layout.hpp"

#include <spattn/error.hpp>

namespace spattn::device {

FlashCall flash_call(const DeviceShape& shape, int64_t smem_words, Pass pass, FlashMasking masking,
                     cuda::ElementType type, bool tensor_cores) {
  FlashCall call;
  const int dim = mma_dim(shape.head_dim, shape.head_dim_v);
  if (tensor_cores && type != cuda::ElementType::fp32 && dim != 0) {
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

namespace spattn::cuda {

DeviceRun plan_call(Pass pass, ElementType type, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                    int64_t head_dim_v, const Mask& mask, const Options& options) {
  const char* where = "spattn::cuda::plan_call";
  if (seqlen_q < 0 || seqlen_k < 0) fail(where, ": seqlen_q = ", seqlen_q, ", seqlen_k = ", seqlen_k, " must be >= 0");
  if (head_dim < 1 || head_dim_v < 1) {
    fail(where, ": head_dim = ", head_dim, ", head_dim_v = ", head_dim_v, " must be >= 1");
  }
  if (mask.seqlen_q() != seqlen_q || mask.seqlen_k() != seqlen_k) {
    fail(where, ": mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", the call is seqlen_q x seqlen_k = ",
         seqlen_q, " x ", seqlen_k);
  }
  if (options.shared_memory_bytes < 0) fail(where, ": shared_memory_bytes = ", options.shared_memory_bytes, " must be >= 0");
  if (options.algorithm == CudaAlgorithm::small_cache) {
    DeviceRun run;
    run.algorithm = CudaAlgorithm::small_cache;
    run.pass = pass;
    return run;
  }
  const int64_t bytes = options.shared_memory_bytes > 0 ? options.shared_memory_bytes : shared_memory_per_block();
  device::DeviceShape shape;
  shape.batch = shape.heads = shape.kv_heads = 1;
  shape.seqlen_q = seqlen_q;
  shape.seqlen_k = seqlen_k;
  shape.head_dim = head_dim;
  shape.head_dim_v = head_dim_v;
  const auto masking = mask.is_full() ? device::FlashMasking::dense : device::FlashMasking::block_sparse;
  return device::flash_run(pass, device::flash_call(shape, bytes / 4, pass, masking, type, options.tensor_cores));
}

}  // namespace spattn::cuda
