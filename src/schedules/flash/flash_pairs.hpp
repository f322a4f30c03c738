// When a flash loop nest hands an outer tile to the kernels as bfloat16 pairs
// (cpu/kernels/flash_kernels.hpp, "bfloat16 pairs").
#pragma once

#include "cpu/kernels/flash_kernels.hpp"

#include <spattn/io.hpp>

#include <cstdint>

namespace spattn::schedules::flash_detail {

// Packs the outer tile `tile` (width, rows), just loaded from `outer`, in place as bfloat16 pairs
// when `outer` and `inner` (the other operand of its score product) are both stored as bfloat16
// (so every float of both tiles is a bfloat16 value) and the kernels in use take such a tile, and
// says whether it did (the step's q_packed, ...); else the tile stays as it is. The words moved do
// not change: the pairs are the same values, in half the tile's bytes.
inline bool pack_bf16_pairs_where_taken(float* tile, int64_t width, int64_t rows,
                                        const io::SlowMatrix<const float>& outer,
                                        const io::SlowMatrix<const float>& inner) {
  if (outer.storage() != io::Storage::bf16 || inner.storage() != io::Storage::bf16) return false;
  if (!flash_kernels::packs_bf16_pairs(rows, width)) return false;
  flash_kernels::pack_bf16_pairs(tile, width, rows);
  return true;
}

}  // namespace spattn::schedules::flash_detail
