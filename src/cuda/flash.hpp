// The block-sparse flash path on the device (flash.cu): fp16 / bf16 inputs with head dims up to 128
// run the tensor-core kernels (mma_kernels.hpp, 64 x 64 tiles) when `tensor_cores` is set and their
// layout fits the budget; otherwise the fp32 kernels with tiles from the planner for the shared
// memory budget, the mask's tile lists uploaded once per mask and tiling (kept in a cache), then
// the kernels of flash_kernels.cu.
#pragma once

#include "cuda/elements.cuh"
#include "device/device_tiles.hpp"

#include <spattn/cuda.hpp>

#include <cuda_runtime.h>

#include <vector>

namespace spattn::cuda::detail {

template <typename T>
struct ForwardViews {
  TensorView<const T> q, k, v;
  TensorView<T> o;
  TensorView<float> lse;
};
template <typename T>
struct BackwardViews {
  TensorView<const T> q, k, v, o;
  TensorView<const float> lse;
  TensorView<const T> d_o;
  TensorView<T> dq, dk, dv;
};

template <typename T>
DeviceRun flash_forward(const device::DeviceShape& shape, const ForwardViews<T>& views,
                        const std::vector<Mask>& masks, float scale, int64_t smem_words,
                        bool tensor_cores, cudaStream_t stream);
template <typename T>
DeviceRun flash_backward(const device::DeviceShape& shape, const BackwardViews<T>& views,
                         const std::vector<Mask>& masks, float scale, int64_t smem_words,
                         bool tensor_cores, cudaStream_t stream);

void release_flash_lists();

}  // namespace spattn::cuda::detail
