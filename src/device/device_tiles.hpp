// Host-side preparation for the CUDA backend, plain C++ so that the CPU build compiles it and the
// CPU tests (tests/cuda_tile_math_test.cpp) run it: the flash tiles for a shared-memory budget, the
// kernels' shared-memory layouts, the mask's tile lists flattened for the device, the mask's CSR in
// 32-bit indices and its transpose, and the validation of the API's shapes.
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/tile_math.hpp"

#include <spattn/mask.hpp>
#include <spattn/tensor.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace spattn::device {

using schedules::FlashMasking;
using schedules::FlashTiles;
using schedules::HeadShape;

// ---- shared-memory layouts (offsets in 4-byte words from the block's dynamic shared memory) ---
// The partial tile's bit set comes first (8-byte aligned: 2 words per uint64), then fp32 buffers
// exactly as the planner counts them (flash.hpp, flash_resident_words), plus the forward's alpha
// (one word per query row: the rescaling factor the row's thread hands to the accumulator threads).
struct ForwardLayout {
  int64_t bits = 0, q = 0, acc = 0, row_max = 0, row_sum = 0, alpha = 0, k = 0, v = 0, s = 0;
  int64_t words = 0;
};
struct DkdvLayout {  // outer: key tile (dkdv_block_k rows); inner: query tile (dkdv_block_q rows)
  int64_t bits = 0, k = 0, v = 0, dk = 0, dv = 0, q = 0, d_o = 0, lse = 0, delta = 0, p = 0;
  int64_t words = 0;
};
struct DqLayout {  // outer: query tile (block_q rows); inner: key tile (block_k rows)
  int64_t bits = 0, q = 0, d_o = 0, lse = 0, delta = 0, dq = 0, k = 0, v = 0, p = 0;
  int64_t words = 0;
};
ForwardLayout forward_layout(const HeadShape& shape, const FlashTiles& tiles, FlashMasking masking);
DkdvLayout dkdv_layout(const HeadShape& shape, const FlashTiles& tiles, FlashMasking masking);
DqLayout dq_layout(const HeadShape& shape, const FlashTiles& tiles, FlashMasking masking);

// The most shared memory (words) one kernel of the pass takes with these tiles.
int64_t device_smem_words(const HeadShape& shape, const FlashTiles& tiles, Pass pass,
                          FlashMasking masking);

// The planner's tiles for a block with `smem_words` words of shared memory: M starts at the budget
// and is lowered by the overflow until the kernels' layouts fit (the GPU keeps a few buffers the
// model does not: the forward's alpha, 64-bit bit words). Throws InvalidArgument, naming the budget
// and the minimum, when not even 1 x 1 tiles fit.
struct DeviceFlashTiles {
  FlashTiles tiles;
  int64_t cache_words = 0;  // M the planner was given
  int64_t smem_words = 0;   // device_smem_words(tiles) <= the budget
};
DeviceFlashTiles device_flash_tiles(const HeadShape& shape, int64_t smem_words, Pass pass,
                                    FlashMasking masking);

// ---- tile lists --------------------------------------------------------------------------------
// One direction of one or more FlashMasks (same tiling), flattened into int32 arrays: list i of
// mask m at tile_ptr[m (T + 1) + i]; offsets are global (mask m's entries follow mask m - 1's).
struct FlatTileLists {
  int64_t num_outer = 0;
  int64_t num_inner = 0;
  int64_t inner_block = 1;
  int64_t bit_words = 0;
  int64_t num_masks = 1;
  std::vector<int32_t> tile_ptr;
  std::vector<int32_t> partial_ptr;
  std::vector<int32_t> entries;
  std::vector<uint64_t> bits;
};
// Throws InvalidArgument when the lists differ in tiling or when a count exceeds int32.
FlatTileLists flatten_tile_lists(const std::vector<const schedules::FlashTileLists*>& lists);
// A TileListsRef over the host arrays (what the kernels get over the device copies).
tile_math::TileListsRef host_ref(const FlatTileLists& lists);

// ---- CSR in 32-bit indices (cuSPARSE) and its transpose -----------------------------------
struct Csr32 {
  int64_t num_rows = 0, num_cols = 0;
  std::vector<int32_t> row_ptr, col;
  // For a transpose: value i of the transpose is value perm[i] of the original.
  std::vector<int32_t> perm;
};
// A mask's pairs in 32-bit CSR, from the form it holds (an element mask's own int32 arrays, the
// row intervals of an interval or block mask, the full mask's rows): no int64 CSR is expanded
// for the compact forms. Throws InvalidArgument naming `what`, before allocating, when nnz or a
// dimension exceeds int32.
Csr32 csr32(const Mask& mask, const char* what);
Csr32 csr32_transpose(const Csr32& csr);  // counting sort: O(nnz + num_cols), columns ascending

// ---- shapes --------------------------------------------------------------------------------
struct ViewInfo {
  const void* data = nullptr;
  std::array<int64_t, 4> shape{0, 0, 0, 0};
};
template <typename T>
ViewInfo info(const TensorView<T>& t) {
  return {static_cast<const void*>(t.data), t.shape};
}
struct DeviceShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0,
          head_dim_v = 0;
  HeadShape head() const { return {seqlen_q, seqlen_k, head_dim, head_dim_v}; }
};
// Throw InvalidArgument naming the argument and the values (prefix `where`).
DeviceShape check_forward(const char* where, const ViewInfo& q, const ViewInfo& k, const ViewInfo& v,
                          const ViewInfo& o, const ViewInfo& lse, const std::vector<Mask>& masks);
DeviceShape check_backward(const char* where, const ViewInfo& q, const ViewInfo& k,
                           const ViewInfo& v, const ViewInfo& o, const ViewInfo& lse,
                           const ViewInfo& d_o, const ViewInfo& dq, const ViewInfo& dk,
                           const ViewInfo& dv, const std::vector<Mask>& masks);
// 1 / sqrt(head_dim) unless given; must be finite.
float resolve_scale(const char* where, const std::optional<double>& scale, int64_t head_dim);

}  // namespace spattn::device
