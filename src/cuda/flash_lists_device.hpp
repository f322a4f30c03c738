// The flash tile lists on the device (flash.cu's list cache holds them): one direction of one or
// more masks, flattened as device::FlatTileLists, in device arrays.
#pragma once

#include "cuda/device_buffer.hpp"
#include "device/device_tiles.hpp"

#include <spattn/mask.hpp>

#include <memory>
#include <vector>

namespace spattn::cuda::detail {

struct DeviceLists {
  DeviceBuffer<int32_t> tile_ptr, partial_ptr, entries;
  DeviceBuffer<uint64_t> bits;
  tile_math::TileListsRef ref;   // over the arrays above
  std::vector<Mask> keep_alive;  // the caches key on the masks' addresses: keep them valid
};

// Built on the device (flash_lists_device.cu): each mask's CSR uploaded once per device and mask
// (cached) and re-blocked by the Thrust algorithm of src/device/thrust, then flattened into the
// 32-bit arrays the kernels read. Throws InvalidArgument when a count exceeds int32 (as
// device::flatten_tile_lists does). Blocks until the lists are complete.
std::shared_ptr<const DeviceLists> build_lists_on_device(const std::vector<Mask>& masks,
                                                         const schedules::FlashTiles& tiles,
                                                         bool key_cols);
// Frees the cached device CSRs (release_device_caches()).
void release_device_csrs();

}  // namespace spattn::cuda::detail
