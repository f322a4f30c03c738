// The flash schedule's tile lists (schedules::FlashTileLists) built with Thrust from an element CSR
// mask: the same algorithm (flash_lists.inl) runs on the device under nvcc
// (src/cuda/flash_lists_device.cu) and on the host with Thrust's CPP device system
// (flash_lists_host.cpp, the library spattn_thrust_host), where the CPU tests compare it with
// schedules::build_flash_mask bit for bit (docs/cuda.md, "Masks built on the device").
//
// This header is plain C++ and includes no Thrust: its callers need not see the toolkit's headers.
#pragma once

#include "device/device_tiles.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/tile_math.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/csr.hpp>

#include <cstdint>

namespace spattn::device {

// Which lists of a FlashMask: query_rows (outer = query tiles of block_q rows, inner = key tiles of
// block_k rows) or key_cols (outer = key tiles of dkdv_block_k rows, inner = query tiles of
// dkdv_block_q rows: the transposed re-blocking).
enum class ListDirection { query_rows, key_cols };

// The shape of one direction's lists, derived once on the host and copied into the functors.
struct ListGeometry {
  int64_t seqlen_q = 0, seqlen_k = 0;
  bool transposed = false;     // key_cols: the outer sequence is the keys
  int64_t outer_rows = 0, inner_rows = 0;
  int64_t outer_block = 1, inner_block = 1;
  int64_t num_outer = 0, num_inner = 0;
  int64_t area = 1;            // outer_block * inner_block: bits per tile
  int64_t bit_words = 1;       // ceil(area / 64)
};

// Throws InvalidArgument when a block is not positive or when the tile-major element index the
// algorithm sorts (num_outer * num_inner * area, about seqlen_q * seqlen_k) exceeds int64.
inline ListGeometry list_geometry(int64_t seqlen_q, int64_t seqlen_k, int64_t outer_block,
                                  int64_t inner_block, ListDirection direction) {
  if (outer_block < 1 || inner_block < 1) {
    fail("tile lists: blocks ", outer_block, " x ", inner_block, " must be positive");
  }
  ListGeometry g;
  g.seqlen_q = seqlen_q;
  g.seqlen_k = seqlen_k;
  g.transposed = direction == ListDirection::key_cols;
  g.outer_rows = g.transposed ? seqlen_k : seqlen_q;
  g.inner_rows = g.transposed ? seqlen_q : seqlen_k;
  g.outer_block = outer_block;
  g.inner_block = inner_block;
  g.num_outer = tile_math::num_tiles(g.outer_rows, outer_block);
  g.num_inner = tile_math::num_tiles(g.inner_rows, inner_block);
  int64_t tiles = 0, keys = 0;
  if (__builtin_mul_overflow(outer_block, inner_block, &g.area) ||
      __builtin_mul_overflow(g.num_outer, g.num_inner, &tiles) ||
      __builtin_mul_overflow(tiles, g.area, &keys)) {
    fail("tile lists: ", g.num_outer, " x ", g.num_inner, " tiles of ", outer_block, " x ",
         inner_block, " overflow the 64-bit element keys");
  }
  g.bit_words = g.area / 64 + (g.area % 64 != 0 ? 1 : 0);
  return g;
}

// The lists of `mask` (seqlen_q x seqlen_k, trusted structure) in `direction`, built by the Thrust
// algorithm on the host, tile by tile as the device walks them; equal, array for array, to
// flatten_tile_lists of build_flash_mask's query_rows (outer_block = block_q, inner_block =
// block_k) or key_cols (outer_block = dkdv_block_k, inner_block = dkdv_block_q). Throws
// InvalidArgument when the mask's shape is not seqlen_q x seqlen_k.
FlatTileLists build_tile_lists_thrust_host(
    const sparse_formats::CsrPatternView<int64_t>& mask, int64_t seqlen_q, int64_t seqlen_k,
    int64_t outer_block, int64_t inner_block, ListDirection direction);

}  // namespace spattn::device
