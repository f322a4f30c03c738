// The CPU emulation of the CUDA backend's flash path (the target cuda_attention_emulated): the
// flash kernels of src/cuda/flash_kernels.cuh launched block after block on the host, the CUDA
// runtime calls that src/cuda/{api,finite_scan,flash,runtime}.cu make served from host memory (one "device"
// with an H100/H200's 232448 bytes of opt-in shared memory), and small_cache refused (it needs
// cuSPARSE).
#include "cuda/finite_scan.hpp"
#include "cuda/flash_kernels.cuh"
#include "cuda/mma_kernels.cuh"
#include "cuda/small_cache.hpp"

#include <spattn/error.hpp>

#include <cstdlib>
#include <cstring>
#include <vector>

namespace spattn::cuda::detail {
namespace flash_device {

std::vector<float>& smem_buffer() {
  static std::vector<float> buffer;
  return buffer;
}
float* dynamic_smem() { return smem_buffer().data(); }

}  // namespace flash_device
namespace {

// One block at a time; its shared memory starts as NaN, so a buffer read before it is written
// poisons the outputs.
template <typename Params>
void run_grid(void (*kernel)(Params), const Params& params, int64_t rows, int64_t block, int64_t heads,
              int64_t words) {
  std::vector<float>& smem = flash_device::smem_buffer();
  for (int64_t y = 0; y < heads; ++y) {
    for (int64_t x = 0; x < tile_math::num_tiles(rows, block); ++x) {
      smem.assign(static_cast<size_t>(words), NAN);
      emulated_block_index = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), 0);
      kernel(params);
    }
  }
}

}  // namespace

template <typename T>
void launch_flash_forward(const ForwardParams<T>& p, cudaStream_t) {
  run_grid(flash_device::forward_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads,
           p.layout.words);
}
template <typename T>
void launch_flash_delta(const DeltaParams<T>& p, cudaStream_t) {
  emulated_block_index = dim3(0, 0, 0);
  flash_device::delta_kernel<T>(p);
}
template <typename T>
void launch_flash_dkdv(const DkdvParams<T>& p, cudaStream_t) {
  run_grid(flash_device::dkdv_kernel<T>, p, p.dims.seqlen_k, p.block_k, p.dims.batch * p.dims.kv_heads,
           p.layout.words);
}
template <typename T>
void launch_flash_dq(const DqParams<T>& p, cudaStream_t) {
  run_grid(flash_device::dq_kernel<T>, p, p.dims.seqlen_q, p.block_q, p.dims.batch * p.dims.heads, p.layout.words);
}

// The tensor-core kernels, one instance per padded head dim.
template <typename T, template <typename, int> class Kernel, typename Params>
void run_mma(const Params& p, int dim, int64_t rows, int64_t heads) {
  switch (dim) {
    case 32:
      return run_grid(Kernel<T, 32>::get(), p, rows, kMmaTile, heads, p.layout.words);
    case 64:
      return run_grid(Kernel<T, 64>::get(), p, rows, kMmaTile, heads, p.layout.words);
    default:
      return run_grid(Kernel<T, 128>::get(), p, rows, kMmaTile, heads, p.layout.words);
  }
}
template <typename T, int Dim>
struct MmaForward {
  static auto get() { return &mma_device::mma_forward_kernel<T, Dim>; }
};
template <typename T, int Dim>
struct MmaDkdv {
  static auto get() { return &mma_device::mma_dkdv_kernel<T, Dim>; }
};
template <typename T, int Dim>
struct MmaDq {
  static auto get() { return &mma_device::mma_dq_kernel<T, Dim>; }
};
template <typename T>
void launch_mma_forward(const ForwardParams<T>& p, int dim, cudaStream_t) {
  run_mma<T, MmaForward>(p, dim, p.dims.seqlen_q, p.dims.batch * p.dims.heads);
}
template <typename T>
void launch_mma_dkdv(const DkdvParams<T>& p, int dim, cudaStream_t) {
  run_mma<T, MmaDkdv>(p, dim, p.dims.seqlen_k, p.dims.batch * p.dims.kv_heads);
}
template <typename T>
void launch_mma_dq(const DqParams<T>& p, int dim, cudaStream_t) {
  run_mma<T, MmaDq>(p, dim, p.dims.seqlen_q, p.dims.batch * p.dims.heads);
}
template void launch_mma_forward<half_t>(const ForwardParams<half_t>&, int, cudaStream_t);
template void launch_mma_dkdv<half_t>(const DkdvParams<half_t>&, int, cudaStream_t);
template void launch_mma_dq<half_t>(const DqParams<half_t>&, int, cudaStream_t);
template void launch_mma_forward<bfloat16_t>(const ForwardParams<bfloat16_t>&, int, cudaStream_t);
template void launch_mma_dkdv<bfloat16_t>(const DkdvParams<bfloat16_t>&, int, cudaStream_t);
template void launch_mma_dq<bfloat16_t>(const DqParams<bfloat16_t>&, int, cudaStream_t);

template <typename T>
DeviceRun small_cache_forward(const device::DeviceShape&, const ForwardViews<T>&, const std::vector<Mask>&, float,
                              cudaStream_t) {
  throw RuntimeError("cuda emulation: small_cache needs cuSPARSE");
}
template <typename T>
DeviceRun small_cache_backward(const device::DeviceShape&, const BackwardViews<T>&, const std::vector<Mask>&, float,
                               cudaStream_t) {
  throw RuntimeError("cuda emulation: small_cache needs cuSPARSE");
}

// The scan for non-finite inputs: one block of one thread strides over the whole tensor.
template <typename T>
void launch_finite_scan(const finite_device::FiniteScanParams<T>& p, cudaStream_t) {
  emulated_block_index = dim3(0, 0, 0);
  finite_device::finite_scan_kernel<T>(p);
}

#define SPATTN_EMULATED(T)                                                                                  \
  template void launch_finite_scan<T>(const finite_device::FiniteScanParams<T>&, cudaStream_t);            \
  template void launch_flash_forward<T>(const ForwardParams<T>&, cudaStream_t);                            \
  template void launch_flash_delta<T>(const DeltaParams<T>&, cudaStream_t);                                \
  template void launch_flash_dkdv<T>(const DkdvParams<T>&, cudaStream_t);                                  \
  template void launch_flash_dq<T>(const DqParams<T>&, cudaStream_t);                                      \
  template DeviceRun small_cache_forward<T>(const device::DeviceShape&, const ForwardViews<T>&,            \
                                            const std::vector<Mask>&, float, cudaStream_t);                \
  template DeviceRun small_cache_backward<T>(const device::DeviceShape&, const BackwardViews<T>&,          \
                                             const std::vector<Mask>&, float, cudaStream_t);
SPATTN_EMULATED(float)
SPATTN_EMULATED(half_t)
SPATTN_EMULATED(bfloat16_t)
#undef SPATTN_EMULATED

}  // namespace spattn::cuda::detail

// The CUDA runtime on host memory.
extern "C" {
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) {
  *value = 232448;  // opt-in shared memory per block of an H100/H200 (the only attribute asked)
  return cudaSuccess;
}
cudaError_t cudaMalloc(void** pointer, size_t bytes) {
  *pointer = std::malloc(bytes > 0 ? bytes : 1);
  return *pointer != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* pointer) {
  std::free(pointer);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind) {
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* pointer, int value, size_t bytes) {
  std::memset(pointer, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute, int) { return cudaSuccess; }
const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
const char* cudaGetErrorString(cudaError_t) { return "error in the CPU emulation"; }
}
