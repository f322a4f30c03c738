// The tile arithmetic of the flash schedules written once for the host and the device: it compiles
// as plain C++ (SPATTN_HD is empty) and, under nvcc, as __host__ __device__ functions the CUDA
// kernels call (src/cuda/flash_kernels.cu). The CPU tests (tests/cuda_tile_math_test.cpp) run
// every function here, so the index arithmetic and the softmax rules the kernels use are tested on
// machines without a GPU.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define SPATTN_HD __host__ __device__
#else
#define SPATTN_HD
#endif

namespace spattn::tile_math {

SPATTN_HD inline float negative_infinity() { return -HUGE_VALF; }

SPATTN_HD inline int64_t num_tiles(int64_t rows, int64_t block) { return (rows + block - 1) / block; }
// Rows of tile `tile` (the last one may be shorter).
SPATTN_HD inline int64_t tile_rows(int64_t rows, int64_t block, int64_t tile) {
  const int64_t left = rows - tile * block;
  return left < block ? left : block;
}
// The kv head of q head h under grouped-query attention (kv_heads divides heads).
SPATTN_HD inline int64_t kv_head_of(int64_t h, int64_t heads, int64_t kv_heads) {
  return h / (heads / kv_heads);
}

// ---- tile lists (flattened FlashTileLists, src/device/device_tiles.hpp builds them) ----------
// For mask m and outer tile i, the entries [tile_ptr[m (T + 1) + i], tile_ptr[m (T + 1) + i + 1])
// of `entries` (2 * inner tile + partial); partial_ptr likewise gives the index of the list's first
// partial tile, whose bit set is bits[partial * bit_words, ...): bit r * inner_block + c is element
// (r, c) of the tile, r along the outer sequence. dense: no arrays, every inner tile, all full.
struct TileListsRef {
  const int32_t* tile_ptr = nullptr;
  const int32_t* partial_ptr = nullptr;
  const int32_t* entries = nullptr;
  const uint64_t* bits = nullptr;
  int64_t num_outer = 0;    // outer tiles (T)
  int64_t num_inner = 0;    // inner tiles
  int64_t inner_block = 1;  // rows per inner tile (the bit set's row length)
  int64_t bit_words = 0;    // words per partial tile's bit set
  int64_t num_masks = 1;    // 1: shared; otherwise one per q head
  bool dense = true;
};

// The mask a q head uses.
SPATTN_HD inline int64_t mask_of_head(const TileListsRef& lists, int64_t head) {
  return lists.num_masks == 1 ? 0 : head;
}
SPATTN_HD inline int64_t list_begin(const TileListsRef& lists, int64_t mask, int64_t outer) {
  return lists.dense ? 0 : lists.tile_ptr[mask * (lists.num_outer + 1) + outer];
}
SPATTN_HD inline int64_t list_end(const TileListsRef& lists, int64_t mask, int64_t outer) {
  return lists.dense ? lists.num_inner : lists.tile_ptr[mask * (lists.num_outer + 1) + outer + 1];
}
SPATTN_HD inline int64_t first_partial(const TileListsRef& lists, int64_t mask, int64_t outer) {
  return lists.dense ? 0 : lists.partial_ptr[mask * (lists.num_outer + 1) + outer];
}
// Entry p of the flattened lists (dense: p is the inner tile itself, full).
SPATTN_HD inline int64_t entry_at(const TileListsRef& lists, int64_t p) {
  return lists.dense ? 2 * p : static_cast<int64_t>(lists.entries[p]);
}
SPATTN_HD inline int64_t entry_tile(int64_t entry) { return entry >> 1; }
SPATTN_HD inline bool entry_partial(int64_t entry) { return (entry & 1) != 0; }
// The bit set of partial tile number `partial` (a running count from first_partial).
SPATTN_HD inline const uint64_t* partial_bits(const TileListsRef& lists, int64_t partial) {
  return lists.bits + partial * lists.bit_words;
}
// Whether element (r, c) of a tile attends: always for a full tile (bits == nullptr).
SPATTN_HD inline bool element_attends(const uint64_t* bits, int64_t inner_block, int64_t r, int64_t c) {
  if (bits == nullptr) return true;
  const int64_t bit = r * inner_block + c;
  return ((bits[bit >> 6] >> (bit & 63)) & 1u) != 0;
}

// Walking one outer tile's list: the kernels' loop (and the CPU tests') is
//   for (ListWalk w = start_walk(lists, mask, outer); w.pos < w.end;) { VisitedTile t = next_tile(lists, w); ... }
struct ListWalk {
  int64_t pos = 0, end = 0, partial = 0;
};
struct VisitedTile {
  int64_t tile = 0;
  const uint64_t* bits = nullptr;  // a partial tile's bit set (in `lists`); nullptr: full
};
SPATTN_HD inline ListWalk start_walk(const TileListsRef& lists, int64_t mask, int64_t outer) {
  ListWalk walk;
  walk.pos = list_begin(lists, mask, outer);
  walk.end = list_end(lists, mask, outer);
  walk.partial = first_partial(lists, mask, outer);
  return walk;
}
SPATTN_HD inline VisitedTile next_tile(const TileListsRef& lists, ListWalk& walk) {
  const int64_t entry = entry_at(lists, walk.pos++);
  VisitedTile tile;
  tile.tile = entry_tile(entry);
  if (entry_partial(entry)) tile.bits = partial_bits(lists, walk.partial++);
  return tile;
}

// ---- the online softmax (forward) ---------------------------------------------------------
// A row's state after some key tiles: max m of its scores so far (-inf: none attended), sum l of
// e^{s - m}. Adding a tile whose attended scores have maximum block_max: the new max, the shift
// the tile's exponentials use (the max, or 0 while nothing attended, so that e^{-inf - 0} = 0
// and no -inf - -inf = NaN arises) and alpha = e^{m - m'}, the factor for l and the accumulator.
struct SoftmaxStep {
  float max = 0.0f;
  float shift = 0.0f;
  float alpha = 0.0f;
};
SPATTN_HD inline SoftmaxStep online_softmax_step(float old_max, float block_max) {
  SoftmaxStep step;
  step.max = old_max > block_max ? old_max : block_max;
  step.shift = step.max == negative_infinity() ? 0.0f : step.max;
  step.alpha = expf(old_max - step.shift);
  return step;
}
// The row's LSE once every tile is added: m + log l, -inf for a row that attended nothing.
SPATTN_HD inline float finish_lse(float max, float sum) {
  return sum > 0.0f ? max + logf(sum) : negative_infinity();
}
// An output entry acc / l; 0 for a row that attended nothing.
SPATTN_HD inline float finish_output(float acc, float sum) { return sum > 0.0f ? acc / sum : 0.0f; }

// ---- the backward ---------------------------------------------------------------------------
// P = e^{scale s - LSE} of an attended pair; 0 in a row that attends nothing (LSE = -inf).
SPATTN_HD inline float probability(float scaled_score, float lse) {
  return lse == negative_infinity() ? 0.0f : expf(scaled_score - lse);
}
// dS = P (dP - D), D = rowsum(dO ∘ O).
SPATTN_HD inline float score_gradient(float p, float dp, float delta) { return p * (dp - delta); }

}  // namespace spattn::tile_math
