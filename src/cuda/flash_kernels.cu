// Launchers of the block-sparse flash kernels (flash_kernels.cuh): grid and shared-memory checks,
// the dynamic shared-memory limit, the launch and its check.
#include "cuda/check.hpp"
#include "cuda/flash_kernels.cuh"

#include <algorithm>
#include <string>

namespace spattn::cuda::detail {

using namespace flash_device;

namespace {

// grid (outer tiles, batch x heads): checked against the device's limits before launching.
dim3 tile_grid(int64_t tiles, int64_t heads, const char* kernel) {
  if (tiles > 0x7fffffff || heads > 65535) {
    throw RuntimeError(std::string("cuda flash: ") + kernel + " needs a grid of " + std::to_string(tiles) +
                       " x " + std::to_string(heads) + " blocks; the limit is 2^31 - 1 x 65535 (batch x heads)");
  }
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(heads));
}

// One block per outer tile (rows / block of them) and head, `words` of dynamic shared memory.
template <typename Params>
void launch_tiles(void (*kernel)(Params), const Params& params, int64_t rows, int64_t block, int64_t heads,
                  int64_t words, cudaStream_t stream, const char* name) {
  const int64_t tiles = tile_math::num_tiles(rows, block);
  if (tiles == 0 || heads == 0) return;
  const dim3 grid = tile_grid(tiles, heads, name);
  SPATTN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(4 * words)));
  kernel<<<grid, kFlashThreads, static_cast<size_t>(4 * words), stream>>>(params);
  check_cuda(cudaGetLastError(), name, __FILE__, __LINE__);
}

}  // namespace

template <typename T>
void launch_flash_forward(const ForwardParams<T>& p, cudaStream_t stream) {
  launch_tiles(forward_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads, p.layout.words,
               stream, "launch of flash forward_kernel");
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
  launch_tiles(dkdv_kernel<T>, p, p.dims.seqlen_k, p.block_k, p.dims.batch * p.dims.kv_heads, p.layout.words,
               stream, "launch of flash dkdv_kernel");
}

template <typename T>
void launch_flash_dq(const DqParams<T>& p, cudaStream_t stream) {
  launch_tiles(dq_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads, p.layout.words,
               stream, "launch of flash dq_kernel");
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
