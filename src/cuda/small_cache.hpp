// The small-cache path on the device (small_cache.cu): the paper's materialize-and-tile algorithm
// composed from cuSPARSE. Per head: S = Q K^T sampled on the mask's CSR (cusparseSDDMM), a
// segmented row softmax (one warp per row), O = P V (cusparseSpMM). Backward: P recomputed from
// LSE, dP = dO V^T on the mask (SDDMM), dS = P (dP - D), dQ = scale dS K, dK = scale dS^T Q and
// dV = P^T dO (SpMM; the transposes are the mask's transposed CSR with the values permuted).
#pragma once

#include "cuda/flash.hpp"  // ForwardViews, BackwardViews

namespace spattn::cuda::detail {

template <typename T>
DeviceRun small_cache_forward(const device::DeviceShape& shape, const ForwardViews<T>& views,
                              const std::vector<Mask>& masks, float scale, cudaStream_t stream);
template <typename T>
DeviceRun small_cache_backward(const device::DeviceShape& shape, const BackwardViews<T>& views,
                               const std::vector<Mask>& masks, float scale, cudaStream_t stream);

}  // namespace spattn::cuda::detail
