// The flash schedule's fast memory per loop nest (flash.hpp's table of resident words), as
// arithmetic on the tiles: what a nest holds for given outer and inner tiles, and the largest tile
// of one side that fits next to the other. The schedule's resident words (flash_tiles.cpp) and the
// planner's tile choice (src/plan/dense_flash_tiles.cpp) both read it.
#pragma once

#include "schedules/flash/flash.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace spattn::schedules::flash_detail {

// The tile fits below compute in 128 bits: with an M near 2^63 (a caller may ask for any M),
// 64 * M and outer * inner overflow int64. Results are clamped back to int64 (a tile never
// exceeds M rows, and callers cap it at the sequence).
__extension__ using Wide = __int128;
// floor(a / b) for b > 0 (C++ division truncates towards zero).
inline Wide floor_div(Wide a, Wide b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); }
inline int64_t clamp_to_int64(Wide value) {
  const Wide top = std::numeric_limits<int64_t>::max(), bottom = std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value > top ? top : value < bottom ? bottom : value);
}

// One loop nest: an outer tile of `outer` rows stays resident (outer * per_outer words), an inner
// tile of `inner` rows streams (inner * per_inner words), their score tiles take
// score_tiles * outer * inner words. `per_outer_alone` is a phase that shares the outer tile size but runs on its own (the
// backward's D pre-pass, which uses the dQ pass's query tiles): outer * per_outer_alone words.
// A masked nest also holds flash_mask_resident_words(outer, inner) index words.
struct Nest {
  int64_t per_outer = 0;
  int64_t per_inner = 0;
  int64_t per_outer_alone = 0;
  int64_t outer_rows = 0;  // the sequence length the outer tiles cover
  int64_t inner_rows = 0;  // the sequence length the inner tiles cover
  bool masked = false;
  int64_t score_tiles = 1;  // the fused dK/dV pass also holds dS transposed
  int64_t inner_fraction = 16;   // outer rows per inner row, up to the inner tile's 16 (dense_flash_tiles.cpp)

  int64_t resident(int64_t outer, int64_t inner) const { return clamp_to_int64(resident_wide(outer, inner)); }
  // resident() without overflow (flash_mask_resident_words: 3 + kFlashListChunk + ceil(o i / 64)).
  Wide resident_wide(Wide outer, Wide inner) const {
    Wide words = outer * per_outer + inner * per_inner + score_tiles * outer * inner;
    if (masked) words += 3 + kFlashListChunk + (outer * inner + 63) / 64;
    return std::max(words, outer * per_outer_alone);
  }
  // The largest outer tile that fits in `cache_words` next to an inner tile of `inner` rows
  // (may be < 1 when none does).
  int64_t outer_fit(int64_t cache_words, int64_t inner) const {
    Wide outer = 0;
    if (!masked) {
      outer = floor_div(Wide{cache_words} - Wide{inner} * per_inner, Wide{per_outer} + score_tiles * Wide{inner});
    } else {
      // ceil(o i / 64) <= (o i + 63) / 64 makes this a lower bound; step up to the exact one.
      const Wide room = Wide{cache_words} - 3 - kFlashListChunk - Wide{inner} * per_inner;
      outer = std::max<Wide>(
          floor_div(64 * room - 63, 64 * Wide{per_outer} + (64 * score_tiles + 1) * Wide{inner}), 0);
      while (resident_wide(outer + 1, inner) <= cache_words) ++outer;
    }
    if (per_outer_alone > 0) outer = std::min<Wide>(outer, cache_words / per_outer_alone);
    return clamp_to_int64(outer);
  }
  // The largest inner tile that fits next to an outer tile of `outer` rows (may be < 1).
  int64_t inner_fit(int64_t cache_words, int64_t outer) const {
    if (!masked) {
      return clamp_to_int64(
          floor_div(Wide{cache_words} - Wide{outer} * per_outer, Wide{per_inner} + score_tiles * Wide{outer}));
    }
    const Wide room = Wide{cache_words} - 3 - kFlashListChunk - Wide{outer} * per_outer;
    Wide inner = std::max<Wide>(
        floor_div(64 * room - 63, 64 * Wide{per_inner} + (64 * score_tiles + 1) * Wide{outer}), 0);
    while (resident_wide(outer, inner + 1) <= cache_words) ++inner;
    return clamp_to_int64(inner);
  }
};

// The four loop nests (flash.hpp lists their buffers), d = head_dim, e = head_dim_v.
inline Nest forward_nest(const HeadShape& s, FlashMasking m) {
  return {s.head_dim + s.head_dim_v + 2, s.head_dim + s.head_dim_v, 0, s.seqlen_q, s.seqlen_k,
          m == FlashMasking::block_sparse};
}
inline Nest dkdv_nest(const HeadShape& s, FlashMasking m) {
  return {2 * s.head_dim + 2 * s.head_dim_v, s.head_dim + s.head_dim_v + 2, 0, s.seqlen_k,
          s.seqlen_q, m == FlashMasking::block_sparse};
}
inline Nest dq_nest(const HeadShape& s, FlashMasking m) {
  return {2 * s.head_dim + s.head_dim_v + 2, s.head_dim + s.head_dim_v, 2 * s.head_dim_v + 1,
          s.seqlen_q, s.seqlen_k, m == FlashMasking::block_sparse};
}
// The dK/dV pass with dQ in it (FlashTiles::dq_in_dkdv): K rows besides K^T (d per key row), the
// query tile's dQ (d per query row) and dS^T next to P/dS.
inline Nest fused_dkdv_nest(const HeadShape& s, FlashMasking m) {
  return {3 * s.head_dim + 2 * s.head_dim_v, 2 * s.head_dim + s.head_dim_v + 2, 0, s.seqlen_k,
          s.seqlen_q, m == FlashMasking::block_sparse, 2, 8};
}
// The D pre-pass of a fused backward, alone: O, dO and D per query row.
inline int64_t delta_words_per_row(const HeadShape& s) { return 2 * s.head_dim_v + 1; }

inline Nest nest_of(const HeadShape& s, FlashNest nest, FlashMasking m) {
  switch (nest) {
    case FlashNest::forward: return forward_nest(s, m);
    case FlashNest::dq: return dq_nest(s, m);
    case FlashNest::dkdv: return dkdv_nest(s, m);
    case FlashNest::fused_dkdv: return fused_dkdv_nest(s, m);
  }
  return forward_nest(s, m);
}

}  // namespace spattn::schedules::flash_detail
