// Tile choice, resident words and the exact I/O prediction of the dense flash schedule
// (flash.hpp; derivations in docs/flash.md). Everything here is O(1) arithmetic on the shape and
// the tiles. The masked predictions are in flash_mask_predict.cpp.
#include "schedules/flash/flash.hpp"

#include "schedules/common/dense_lines.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <ostream>
#include <limits>

namespace spattn::schedules {
namespace {

using flash_detail::NestTiles;
using flash_detail::num_tiles;

// The tile fits below compute in 128 bits: with an M near 2^63 (a caller may ask for any M),
// 64 * M and outer * inner overflow int64. Results are clamped back to int64 (a tile never
// exceeds M rows, and callers cap it at the sequence).
__extension__ using Wide = __int128;
// floor(a / b) for b > 0 (C++ division truncates towards zero).
Wide floor_div(Wide a, Wide b) { return a / b - (a % b != 0 && a < 0 ? 1 : 0); }
int64_t clamp_to_int64(Wide value) {
  const Wide top = std::numeric_limits<int64_t>::max(), bottom = std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value > top ? top : value < bottom ? bottom : value);
}

// One loop nest: an outer tile of `outer` rows stays resident (outer * per_outer words), an inner
// tile of `inner` rows streams (inner * per_inner words), their score tile takes outer * inner
// words. `per_outer_alone` is a phase that shares the outer tile size but runs on its own (the
// backward's D pre-pass, which uses the dQ pass's query tiles): outer * per_outer_alone words.
// A masked nest also holds flash_mask_resident_words(outer, inner) index words.
struct Nest {
  int64_t per_outer = 0;
  int64_t per_inner = 0;
  int64_t per_outer_alone = 0;
  int64_t outer_rows = 0;  // the sequence length the outer tiles cover
  int64_t inner_rows = 0;  // the sequence length the inner tiles cover
  bool masked = false;

  int64_t resident(int64_t outer, int64_t inner) const { return clamp_to_int64(resident_wide(outer, inner)); }
  // resident() without overflow (flash_mask_resident_words: 3 + kFlashListChunk + ceil(o i / 64)).
  Wide resident_wide(Wide outer, Wide inner) const {
    Wide words = outer * per_outer + inner * per_inner + outer * inner;
    if (masked) words += 3 + kFlashListChunk + (outer * inner + 63) / 64;
    return std::max(words, outer * per_outer_alone);
  }
  // The largest outer tile that fits in `cache_words` next to an inner tile of `inner` rows
  // (may be < 1 when none does).
  int64_t outer_fit(int64_t cache_words, int64_t inner) const {
    Wide outer = 0;
    if (!masked) {
      outer = floor_div(Wide{cache_words} - Wide{inner} * per_inner, Wide{per_outer} + inner);
    } else {
      // ceil(o i / 64) <= (o i + 63) / 64 makes this a lower bound; step up to the exact one.
      const Wide room = Wide{cache_words} - 3 - kFlashListChunk - Wide{inner} * per_inner;
      outer = std::max<Wide>(floor_div(64 * room - 63, 64 * Wide{per_outer} + 65 * Wide{inner}), 0);
      while (resident_wide(outer + 1, inner) <= cache_words) ++outer;
    }
    if (per_outer_alone > 0) outer = std::min<Wide>(outer, cache_words / per_outer_alone);
    return clamp_to_int64(outer);
  }
  // The largest inner tile that fits next to an outer tile of `outer` rows (may be < 1).
  int64_t inner_fit(int64_t cache_words, int64_t outer) const {
    if (!masked) {
      return clamp_to_int64(floor_div(Wide{cache_words} - Wide{outer} * per_outer, Wide{per_inner} + outer));
    }
    const Wide room = Wide{cache_words} - 3 - kFlashListChunk - Wide{outer} * per_outer;
    Wide inner = std::max<Wide>(floor_div(64 * room - 63, 64 * Wide{per_inner} + 65 * Wide{outer}), 0);
    while (resident_wide(outer, inner + 1) <= cache_words) ++inner;
    return clamp_to_int64(inner);
  }
};

// The four loop nests (flash.hpp lists their buffers), d = head_dim, e = head_dim_v.
Nest forward_nest(const HeadShape& s, FlashMasking m) {
  return {s.head_dim + s.head_dim_v + 2, s.head_dim + s.head_dim_v, 0, s.seqlen_q, s.seqlen_k,
          m == FlashMasking::block_sparse};
}
Nest dkdv_nest(const HeadShape& s, FlashMasking m) {
  return {2 * s.head_dim + 2 * s.head_dim_v, s.head_dim + s.head_dim_v + 2, 0, s.seqlen_k,
          s.seqlen_q, m == FlashMasking::block_sparse};
}
Nest dq_nest(const HeadShape& s, FlashMasking m) {
  return {2 * s.head_dim + s.head_dim_v + 2, s.head_dim + s.head_dim_v, 2 * s.head_dim_v + 1,
          s.seqlen_q, s.seqlen_k, m == FlashMasking::block_sparse};
}

// The inner tile never exceeds this many rows, nor 1/kInnerFraction of the outer tile: it moves no
// extra word but takes memory from the outer tile, which sets the I/O. A few rows keep the inner
// loops matrix-matrix shaped (and the forward's online-softmax rescaling rare).
constexpr int64_t kMaxInnerRows = 16;
constexpr int64_t kInnerFraction = 16;

// Precondition: cache_words >= nest.resident(1, 1). outer_limit caps the outer tile below what M
// allows (flash_tile_choice.hpp); then the inner tile takes up to kMaxInnerRows of the memory left
// (never more: in a masked run a larger inner tile covers more pairs outside the mask).
NestTiles choose(const Nest& nest, int64_t cache_words, int64_t outer_limit) {
  const int64_t outer_cap = std::max<int64_t>(nest.outer_rows, 1);
  const int64_t inner_cap = std::max<int64_t>(nest.inner_rows, 1);
  const int64_t outer_1 = nest.outer_fit(cache_words, 1);
  NestTiles tiles;
  if (outer_1 >= outer_cap) {
    // The whole sequence fits as one outer tile: take it, so the inner operands stream once, and
    // give the memory left to the inner tile (a smaller inner tile than kMaxInnerRows where that
    // is what keeps the outer tile whole: splitting it would read the inner operands twice).
    tiles.outer = outer_cap;
    tiles.inner = std::clamp<int64_t>(nest.inner_fit(cache_words, outer_cap), 1, inner_cap);
  } else {
    tiles.inner = std::clamp<int64_t>(std::min(kMaxInnerRows, outer_1 / kInnerFraction), 1, inner_cap);
    tiles.outer = std::min(nest.outer_fit(cache_words, tiles.inner), outer_cap);
    if (tiles.outer < 1) tiles = {std::min(outer_1, outer_cap), 1};  // defensive; see docs/flash.md
  }
  if (outer_limit < tiles.outer && outer_limit >= 1) {
    tiles.outer = outer_limit;
    tiles.inner = std::clamp<int64_t>(std::min(kMaxInnerRows, nest.inner_fit(cache_words, outer_limit)), 1,
                                      inner_cap);
  }
  return tiles;
}

Nest nest_of(const HeadShape& s, flash_detail::FlashNest nest, FlashMasking m) {
  switch (nest) {
    case flash_detail::FlashNest::forward: return forward_nest(s, m);
    case flash_detail::FlashNest::dq: return dq_nest(s, m);
    case flash_detail::FlashNest::dkdv: return dkdv_nest(s, m);
  }
  return forward_nest(s, m);
}

void check_shape(const HeadShape& shape, const char* what) {
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail(what, ": negative shape (seqlen_q ", shape.seqlen_q, ", seqlen_k ", shape.seqlen_k,
         ", head_dim ", shape.head_dim, ", head_dim_v ", shape.head_dim_v, ")");
  }
}

void check_tile(const char* what, const char* name, int64_t rows) {
  if (rows < 1) fail(what, ": tile ", name, " = ", rows, " rows must be positive");
}

}  // namespace


namespace flash_detail {
NestTiles nest_tiles(const HeadShape& shape, int64_t cache_words, FlashNest nest, FlashMasking masking,
                     int64_t outer_limit) {
  const Pass pass = nest == FlashNest::forward ? Pass::forward : Pass::backward;
  if (cache_words < flash_min_cache_words(shape, pass, masking)) {
    fail("nest_tiles: M = ", cache_words, " words is below the minimum ",
         flash_min_cache_words(shape, pass, masking));
  }
  return choose(nest_of(shape, nest, masking), cache_words, outer_limit);
}

void check_tiles(const FlashTiles& tiles, Pass pass, const char* what) {
  check_tile(what, "block_q", tiles.block_q);
  check_tile(what, "block_k", tiles.block_k);
  if (pass == Pass::backward) {
    check_tile(what, "dkdv_block_q", tiles.dkdv_block_q);
    check_tile(what, "dkdv_block_k", tiles.dkdv_block_k);
  }
}
}  // namespace flash_detail

int64_t flash_resident_words(const HeadShape& shape, const FlashTiles& tiles, Pass pass,
                             FlashMasking masking) {
  check_shape(shape, "flash_resident_words");
  flash_detail::check_tiles(tiles, pass, "flash_resident_words");
  if (pass == Pass::forward) return forward_nest(shape, masking).resident(tiles.block_q, tiles.block_k);
  return std::max(dkdv_nest(shape, masking).resident(tiles.dkdv_block_k, tiles.dkdv_block_q),
                  dq_nest(shape, masking).resident(tiles.block_q, tiles.block_k));
}

int64_t flash_min_cache_words(const HeadShape& shape, Pass pass, FlashMasking masking) {
  check_shape(shape, "flash_min_cache_words");
  return flash_resident_words(shape, FlashTiles{1, 1, 1, 1}, pass, masking);
}

FlashTiles flash_tiles(const HeadShape& shape, int64_t cache_words, Pass pass,
                       FlashMasking masking) {
  const int64_t minimum = flash_min_cache_words(shape, pass, masking);
  if (cache_words < minimum) {
    const int64_t d = shape.head_dim;
    const int64_t e = shape.head_dim_v;
    const char* mask_words = masking == FlashMasking::block_sparse
                                 ? " + 20 words of mask structure (list header, chunk, bits)"
                                 : "";
    if (pass == Pass::forward) {
      fail("flash forward: M = ", cache_words, " words is below the minimum ", minimum,
           " for head_dim ", d, " and head_dim_v ", e,
           " (1 x 1 tiles hold Q, O, max, sum | K, V | S: 2 d + 2 d_v + 3 words", mask_words, ")");
    }
    fail("flash backward: M = ", cache_words, " words is below the minimum ", minimum,
         " for head_dim ", d, " and head_dim_v ", e,
         " (1 x 1 tiles of the dK/dV pass hold K, V, dK, dV | Q, dO, LSE, D | P: 3 d + 3 d_v + 3 "
         "words", mask_words, ")");
  }
  constexpr int64_t kNoLimit = INT64_MAX;
  FlashTiles tiles;
  if (pass == Pass::forward) {
    const NestTiles t = choose(forward_nest(shape, masking), cache_words, kNoLimit);
    tiles.block_q = t.outer;
    tiles.block_k = t.inner;
    return tiles;
  }
  const NestTiles kv = choose(dkdv_nest(shape, masking), cache_words, kNoLimit);
  const NestTiles q = choose(dq_nest(shape, masking), cache_words, kNoLimit);
  tiles.block_q = q.outer;
  tiles.block_k = q.inner;
  tiles.dkdv_block_k = kv.outer;
  tiles.dkdv_block_q = kv.inner;
  return tiles;
}

namespace flash_detail {

IoCount predict_dense_forward(const HeadShape& shape, const FlashTiles& tiles) {
  check_shape(shape, "predict_flash_forward");
  check_tiles(tiles, Pass::forward, "predict_flash_forward");
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  IoCount count;
  count.writes = n_q * (e + 1);  // O and LSE, each word once
  if (n_k == 0) return count;     // nothing to attend: O = 0, LSE = -inf, nothing read
  count.reads = n_q * d + num_tiles(n_q, tiles.block_q) * n_k * (d + e);
  return count;
}

IoCount predict_dense_backward(const HeadShape& shape, const FlashTiles& tiles) {
  check_shape(shape, "predict_flash_backward");
  check_tiles(tiles, Pass::backward, "predict_flash_backward");
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  IoCount count;
  if (n_q == 0 || n_k == 0) {
    count.writes = n_k * (d + e) + n_q * d;  // zero gradients; D is neither needed nor written
    return count;
  }
  const IoCount delta_pass{2 * n_q * e, n_q};
  const IoCount dkdv_pass{n_k * (d + e) + num_tiles(n_k, tiles.dkdv_block_k) * n_q * (d + e + 2),
                          n_k * (d + e)};
  const IoCount dq_pass{n_q * (d + e + 2) + num_tiles(n_q, tiles.block_q) * n_k * (d + e), n_q * d};
  return delta_pass + dkdv_pass + dq_pass;
}

}  // namespace flash_detail

IoCount predict_dense_forward_lines(const HeadShape& shape, const FlashTiles& tiles, int64_t line_words) {
  using namespace flash_detail;
  check_shape(shape, "predict_dense_forward_lines");
  check_tiles(tiles, Pass::forward, "predict_dense_forward_lines");
  io::check_line_words("predict_dense_forward_lines", line_words);
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k, L = line_words;
  const int64_t d = shape.head_dim, e = shape.head_dim_v, bq = tiles.block_q, bk = tiles.block_k;
  IoCount count;
  count.writes = dense_grid_lines(n_q, e, bq, e, L) + io::chunked_lines(n_q, bq, L);  // O, LSE
  if (n_k == 0) return count;
  count.reads = dense_grid_lines(n_q, d, bq, d, L) +
                num_tiles(n_q, bq) * (dense_grid_lines(n_k, d, bk, d, L) + dense_grid_lines(n_k, e, bk, e, L));
  return count;
}

IoCount predict_dense_backward_lines(const HeadShape& shape, const FlashTiles& tiles, int64_t line_words) {
  using namespace flash_detail;
  check_shape(shape, "predict_dense_backward_lines");
  check_tiles(tiles, Pass::backward, "predict_dense_backward_lines");
  io::check_line_words("predict_dense_backward_lines", line_words);
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k, L = line_words;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const int64_t bq = tiles.block_q, bk = tiles.block_k;
  const int64_t cq = tiles.dkdv_block_q, ck = tiles.dkdv_block_k;
  const int64_t gradients = dense_grid_lines(n_k, d, ck, d, L) + dense_grid_lines(n_k, e, ck, e, L) + dense_grid_lines(n_q, d, bq, d, L);
  if (n_q == 0 || n_k == 0) return {0, gradients};  // zero gradients; D is neither needed nor written
  IoCount count;
  count.writes = gradients + io::chunked_lines(n_q, bq, L);  // + D
  // D pre-pass: O, dO per query tile of bq rows.
  count.reads = 2 * dense_grid_lines(n_q, e, bq, e, L);
  // dK/dV pass: K, V per key tile; Q, dO, LSE and D per query tile it visits.
  count.reads += dense_grid_lines(n_k, d, ck, d, L) + dense_grid_lines(n_k, e, ck, e, L) +
                 num_tiles(n_k, ck) * (dense_grid_lines(n_q, d, cq, d, L) + dense_grid_lines(n_q, e, cq, e, L) +
                                       2 * io::chunked_lines(n_q, cq, L));
  // dQ pass: Q, dO, LSE and D per query tile; K, V per key tile it visits.
  count.reads += dense_grid_lines(n_q, d, bq, d, L) + dense_grid_lines(n_q, e, bq, e, L) + 2 * io::chunked_lines(n_q, bq, L) +
                 num_tiles(n_q, bq) * (dense_grid_lines(n_k, d, bk, d, L) + dense_grid_lines(n_k, e, bk, e, L));
  return count;
}

HeadShape head_shape(const HeadForward& problem) {
  return {problem.q.rows(), problem.k.rows(), problem.q.cols(), problem.v.cols()};
}
HeadShape head_shape(const HeadBackward& problem) {
  return {problem.q.rows(), problem.k.rows(), problem.q.cols(), problem.v.cols()};
}

std::ostream& operator<<(std::ostream& out, const FlashTiles& tiles) {
  return out << "block_q " << tiles.block_q << ", block_k " << tiles.block_k << ", dkdv_block_q " << tiles.dkdv_block_q
             << ", dkdv_block_k " << tiles.dkdv_block_k;
}

}  // namespace spattn::schedules
