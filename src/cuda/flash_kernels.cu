// Launchers of the block-sparse flash kernels (flash_kernels.cuh): grid and shared-memory checks,
// the dynamic shared-memory limit, the launch and its check.
#include "cuda/check.hpp"
#include "cuda/flash_kernels.cuh"
#include "cuda/launch.cuh"

#include <algorithm>
#include <string>

namespace spattn::cuda::detail {

using namespace flash_device;

template <typename T>
void launch_flash_forward(const ForwardParams<T>& p, cudaStream_t stream) {
  launch_tiles(forward_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads, kFlashThreads,
               4 * p.layout.words, stream, "launch of flash forward_kernel");
}

template <typename T>
void launch_flash_delta(const DeltaParams<T>& p, cudaStream_t stream) {
  const int64_t total = p.dims.batch * p.dims.heads * p.dims.seqlen_q;
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + 255) / 256, 65535);
  delta_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p);
  SPATTN_CUDA_CHECK_LAUNCH("flash delta_kernel");
}

template <typename T>
void launch_flash_dkdv(const DkdvParams<T>& p, cudaStream_t stream) {
  launch_tiles(dkdv_kernel<T>, p, p.dims.seqlen_k, p.block_k, p.dims.batch * p.dims.kv_heads, kFlashThreads,
               4 * p.layout.words, stream, "launch of flash dkdv_kernel");
}

template <typename T>
void launch_flash_dq(const DqParams<T>& p, cudaStream_t stream) {
  launch_tiles(dq_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads, kFlashThreads,
               4 * p.layout.words, stream, "launch of flash dq_kernel");
}

#define SPATTN_FLASH_LAUNCHERS(T)                                                  \
  template void launch_flash_forward<T>(const ForwardParams<T>&, cudaStream_t); \
  template void launch_flash_delta<T>(const DeltaParams<T>&, cudaStream_t);     \
  template void launch_flash_dkdv<T>(const DkdvParams<T>&, cudaStream_t);       \
  template void launch_flash_dq<T>(const DqParams<T>&, cudaStream_t);
SPATTN_FLASH_LAUNCHERS(float)
SPATTN_FLASH_LAUNCHERS(half_t)
SPATTN_FLASH_LAUNCHERS(bfloat16_t)
#undef SPATTN_FLASH_LAUNCHERS

}  // namespace spattn::cuda::detail
