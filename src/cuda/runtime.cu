// Device discovery and the device-memory helpers of include/spattn/cuda.hpp.
#include <spattn/cuda.hpp>

#include "cuda/check.hpp"
#include "cuda/runtime.hpp"

#include <string>

namespace spattn::cuda {

std::string device_status() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls are not confused
    return std::string("no CUDA device: cudaGetDeviceCount returned ") + cudaGetErrorName(status) +
           " (" + cudaGetErrorString(status) + ")";
  }
  if (count == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

bool device_available() { return device_status().empty(); }

int64_t shared_memory_per_block() {
  detail::require_device("shared_memory_per_block");
  int device = 0;
  SPATTN_CUDA_CHECK(cudaGetDevice(&device));
  int bytes = 0;
  SPATTN_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

namespace detail {

void require_device(const char* what) {
  const std::string status = device_status();
  if (!status.empty()) throw RuntimeError(std::string("spattn::cuda::") + what + ": " + status);
}

void* device_allocate(std::size_t bytes) {
  require_device("DeviceMemory");
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, bytes);
  if (status != cudaSuccess) {
    throw RuntimeError("spattn::cuda::DeviceMemory: cudaMalloc of " + std::to_string(bytes) +
                       " bytes failed: " + cudaGetErrorString(status));
  }
  return pointer;
}
void device_free(void* pointer) noexcept {
  if (pointer != nullptr) cudaFree(pointer);
}
void copy_to_device(void* device, const void* host, std::size_t bytes) {
  SPATTN_CUDA_CHECK(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* host, const void* device, std::size_t bytes) {
  SPATTN_CUDA_CHECK(cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost));
}
void device_fill_zero(void* device, std::size_t bytes) {
  SPATTN_CUDA_CHECK(cudaMemset(device, 0, bytes));
}
void device_synchronize() { SPATTN_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace detail
}  // namespace spattn::cuda
