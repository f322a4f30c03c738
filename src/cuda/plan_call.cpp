// spattn::cuda::plan_call (spattn/cuda.hpp): the host planning of src/device for one call, plain
// C++ compiled in every build, so that a CPU build previews what a device would run.
#include <spattn/cuda.hpp>

#include "device/device_plan.hpp"

#include <spattn/error.hpp>

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
