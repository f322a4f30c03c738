// Where the CUDA backend's flash tile lists come from, read back for the device tests
// (tests/cuda/cuda_flash_lists_test.cpp). Plain C++: the tests compile it in every build; without
// CUDA it throws (src/cuda/unavailable.cpp).
#pragma once

#include "device/device_tiles.hpp"

#include <spattn/mask.hpp>

#include <vector>

namespace spattn::device {

// thrust: the CUDA backend's own path: each mask's CSR uploaded once (cached) and re-blocked on the
// device by the Thrust algorithm (src/device/thrust). host: build_flash_mask on the host,
// flattened and uploaded, as the backend did before; kept to compare the two.
enum class ListsBuilder { thrust, host };

// One direction (key_cols: the dK/dV pass's key tiles) of the flattened lists of `masks` for
// `tiles` and `pass`, built by `builder` on the current device and copied back, outside the
// backend's list cache. Throws RuntimeError without CUDA or a device.
FlatTileLists device_flash_lists(const std::vector<Mask>& masks, const FlashTiles& tiles, Pass pass,
                                 bool key_cols, ListsBuilder builder);

}  // namespace spattn::device
