// The tensor-core flash kernels (mma_kernels.cuh) for fp16 / bf16 inputs: their launchers. Tiles
// and shared-memory layouts are in device/mma_layout.hpp (plain C++: the plan uses them too). They
// take the fp32 kernels' parameter structs (flash_kernels.hpp) with block_q = block_k = kMmaTile;
// each layout's size goes into `layout.words`.
#pragma once

#include "cuda/flash_kernels.hpp"
#include "device/mma_layout.hpp"

#include <cstdint>

namespace spattn::cuda::detail {

using device::kDkdvThreads;
using device::kMmaMaxDim;
using device::kMmaStrip;
using device::kMmaThreads;
using device::kMmaTile;
using device::mma_dim;
using device::mma_layout;
using device::MmaLayout;

// Launchers (mma_kernels.cu): one block of kMmaThreads (dK/dV: kDkdvThreads) per 64-row outer
// tile and head, `dim` = mma_dim(d, e). p.layout.words must hold mma_layout(dim, pass).bytes / 4.
template <typename T>
void launch_mma_forward(const ForwardParams<T>& params, int dim, cudaStream_t stream);
template <typename T>
void launch_mma_dkdv(const DkdvParams<T>& params, int dim, cudaStream_t stream);
template <typename T>
void launch_mma_dq(const DqParams<T>& params, int dim, cudaStream_t stream);

}  // namespace spattn::cuda::detail
