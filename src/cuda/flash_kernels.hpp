// The block-sparse flash kernels (flash_kernels.cu): their parameters and launchers. One thread
// block per outer tile and head; tiles, shared-memory layouts and tile lists come from the host
// (src/device/device_tiles.hpp), the per-element rules from src/schedules/common/tile_math.hpp.
#pragma once

#include "cuda/elements.cuh"
#include "device/device_tiles.hpp"
#include "schedules/common/tile_math.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace spattn::cuda::detail {

constexpr int kFlashThreads = 256;

struct FlashDims {
  int64_t batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0, d = 0, e = 0;
  float scale = 1.0f;
};

template <typename T>
struct ForwardParams {
  Strided<const T> q, k, v;
  Strided<T> o;
  Strided<float> lse;
  FlashDims dims;
  int64_t block_q = 1, block_k = 1;
  tile_math::TileListsRef lists;  // per query tile: key tiles
  device::ForwardLayout layout;
};

// D = rowsum(dO ∘ O), (batch, heads, seqlen_q) contiguous.
template <typename T>
struct DeltaParams {
  Strided<const T> o, d_o;
  float* delta = nullptr;
  FlashDims dims;
};

template <typename T>
struct DkdvParams {
  Strided<const T> q, k, v, d_o;
  Strided<const float> lse;
  const float* delta = nullptr;
  Strided<T> dk, dv;
  FlashDims dims;
  int64_t block_q = 1, block_k = 1;  // dkdv_block_q (inner), dkdv_block_k (outer)
  tile_math::TileListsRef lists;     // per key tile: query tiles
  device::DkdvLayout layout;
};

template <typename T>
struct DqParams {
  Strided<const T> q, k, v, d_o;
  Strided<const float> lse;
  const float* delta = nullptr;
  Strided<T> dq;
  FlashDims dims;
  int64_t block_q = 1, block_k = 1;
  tile_math::TileListsRef lists;  // per query tile: key tiles
  device::DqLayout layout;
};

// Each launcher sets the kernel's dynamic shared memory limit, launches, and checks the launch.
// Nothing is launched for an empty grid.
template <typename T>
void launch_flash_forward(const ForwardParams<T>& params, cudaStream_t stream);
template <typename T>
void launch_flash_delta(const DeltaParams<T>& params, cudaStream_t stream);
template <typename T>
void launch_flash_dkdv(const DkdvParams<T>& params, cudaStream_t stream);
template <typename T>
void launch_flash_dq(const DqParams<T>& params, cudaStream_t stream);

}  // namespace spattn::cuda::detail
