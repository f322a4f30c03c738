// A device array owned for the duration of one call (scratch, uploaded structures).
#pragma once

#include "cuda/check.hpp"

#include <cstddef>
#include <vector>

namespace spattn::cuda::detail {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t size) : size_(size) {
    if (size_ > 0) {
      void* pointer = nullptr;
      SPATTN_CUDA_CHECK(cudaMalloc(&pointer, size_ * sizeof(T)));
      data_ = static_cast<T*>(pointer);
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    if (size_ > 0) {
      SPATTN_CUDA_CHECK(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice));
      // cudaMemcpy from pageable memory may return before the DMA into data_ completes; it is
      // ordered with the default stream only, and the kernels reading data_ may run on a
      // non-blocking stream of the caller's: wait for it here (uploads are once per call or mask).
      SPATTN_CUDA_CHECK(cudaStreamSynchronize(nullptr));
    }
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);  // no throw from a destructor; errors resurface later
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      if (data_ != nullptr) cudaFree(data_);
      data_ = other.data_;
      size_ = other.size_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace spattn::cuda::detail
