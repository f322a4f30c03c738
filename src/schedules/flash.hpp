// The flash schedule: FlashAttention-style tiling for the large-cache regime (theory.md section 4),
// dense, fp32, forward and backward, with an exact closed-form count of the words it moves.
// docs/flash.md derives every formula below.
//
// Every loop nest keeps one tile resident (the outer tile) and streams the other operand through
// it in tiles of a few rows (the inner tile):
//
//   forward               per query tile (block_q rows):   stream key tiles (block_k rows)
//   backward D pre-pass   per query tile (block_q rows):   D = rowsum(dO ∘ O), written to slow
//   backward dK/dV pass   per key tile (dkdv_block_k rows): stream query tiles (dkdv_block_q rows)
//   backward dQ pass      per query tile (block_q rows):   stream key tiles (block_k rows)
//
// The words moved depend on the outer tile (how often the streamed operand is re-read); the
// inner tile only takes fast memory. flash_tiles() therefore makes the outer tile as large as M
// allows and the inner tile small (docs/flash.md, "Tile choice"). Square tiles would not do:
// with B x B tiles B grows like sqrt(M), not M / d, and the I/O misses Theta(n^2 d^2 / M).
#pragma once

#include "schedules/head_problem.hpp"

#include <spattn/error.hpp>

#include <cstdint>

namespace spattn::schedules {

enum class Pass { forward, backward };
const char* pass_name(Pass pass);  // "forward" / "backward"

// Tile sizes in rows. All four are >= 1 for the backward; the forward uses block_q and block_k
// (the dkdv fields may be 0 there).
struct FlashTiles {
  // Forward, the backward's D pre-pass and its dQ pass: a query tile of block_q rows stays in fast
  // memory while key tiles of block_k rows stream through it.
  int64_t block_q = 0;
  int64_t block_k = 0;
  // The backward's dK/dV pass: a key tile of dkdv_block_k rows stays in fast memory while query
  // tiles of dkdv_block_q rows stream through it.
  int64_t dkdv_block_q = 0;
  int64_t dkdv_block_k = 0;

  friend bool operator==(const FlashTiles& a, const FlashTiles& b) {
    return a.block_q == b.block_q && a.block_k == b.block_k && a.dkdv_block_q == b.dkdv_block_q &&
           a.dkdv_block_k == b.dkdv_block_k;
  }
};

// The words resident in fast memory while the schedule runs with these tiles: the peak, exactly
// (the largest over the loop nests of a pass; each nest allocates its buffers once, before its
// loops). With d = head_dim, e = head_dim_v, (bq, bk) = (block_q, block_k), (cq, ck) = the dkdv
// tiles:
//   forward      bq (d + e + 2) + bk (d + e) + bq bk        Q, O acc, max, sum | K, V | S/P
//   D pre-pass   bq (2 e + 1)                               O, dO, D
//   dK/dV pass   ck (2 d + 2 e) + cq (d + e + 2) + cq ck    K, V, dK, dV | Q, dO, LSE, D | P/dS
//   dQ pass      bq (2 d + e + 2) + bk (d + e) + bq bk      Q, dO, LSE, D, dQ | K, V | P/dS
// Throws InvalidArgument when a tile the pass uses is not positive.
int64_t flash_resident_words(const HeadShape& shape, const FlashTiles& tiles, Pass pass);

// The smallest M for which 1 x 1 tiles fit (independent of the sequence lengths):
//   forward   2 d + 2 e + 3
//   backward  3 d + 3 e + 3   (the dK/dV pass; the dQ pass needs 3 d + 2 e + 3, D 2 e + 1)
// e.g. 387 words for the backward at d = e = 64.
int64_t flash_min_cache_words(const HeadShape& shape, Pass pass);

// The tiles for a fast memory of cache_words words: the outer tile of each loop nest as large as
// fits next to an inner tile of min(16, outer_1 / 16) rows (at least 1; outer_1 = the outer tile
// that fits next to a 1-row inner tile), both capped at their sequence lengths; when the outer
// tile is capped, the inner tile grows into the memory left. This is the only place flash tiles
// are chosen. Throws InvalidArgument when cache_words < flash_min_cache_words(shape, pass),
// stating the minimum.
FlashTiles flash_tiles(const HeadShape& shape, int64_t cache_words, Pass pass);

// The exact words moved by flash_forward / flash_backward with these tiles, in O(1) arithmetic.
// With n_q = seqlen_q, n_k = seqlen_k, T(n, b) = ceil(n / b), and both seqlens positive:
//   forward  reads  n_q d + T(n_q, bq) n_k (d + e)
//            writes n_q (e + 1)
//   backward reads  2 n_q e                                    D pre-pass: O, dO
//                 + n_k (d + e) + T(n_k, ck) n_q (d + e + 2)   dK/dV pass: K, V | Q, dO, LSE, D
//                 + n_q (d + e + 2) + T(n_q, bq) n_k (d + e)   dQ pass: Q, dO, LSE, D | K, V
//            writes n_q + n_k (d + e) + n_q d                  D, dK, dV, dQ
// When a seqlen is 0 nothing is read and only the (zero / -inf) outputs are written.
IoCount predict_flash_forward(const HeadShape& shape, const FlashTiles& tiles);
IoCount predict_flash_backward(const HeadShape& shape, const FlashTiles& tiles);

// Run the schedule: every buffer is allocated from `fast` once per loop nest, every operand moves
// with fast.load / fast.store (counted when `fast` has a ledger). The shape comes from the views;
// throws InvalidArgument on inconsistent views or non-positive tiles (before writing anything),
// RuntimeError (from FastMemory) when the tiles do not fit in M.
void flash_forward(io::FastMemory& fast, const HeadForward& problem, const FlashTiles& tiles);
void flash_backward(io::FastMemory& fast, const HeadBackward& problem, const FlashTiles& tiles);

// The shape of a problem, read from its views (no validation).
HeadShape head_shape(const HeadForward& problem);
HeadShape head_shape(const HeadBackward& problem);

namespace flash_detail {

// Which tiles a loop visits. Dense: all of them, in order. The block-sparse schedule replaces
// these two functions with the mask's block-row list (key tiles of query tile i) and block-column
// list (query tiles of key tile j); the loops and the predictions go through them only.
struct TileList {
  int64_t count = 0;
  int64_t operator[](int64_t position) const { return position; }  // the tile index
};
// The key tiles query tile `query_tile` visits (forward, dQ pass), out of `num_key_tiles`.
inline TileList key_tiles_of(int64_t /*query_tile*/, int64_t num_key_tiles) {
  return TileList{num_key_tiles};
}
// The query tiles key tile `key_tile` visits (dK/dV pass), out of `num_query_tiles`.
inline TileList query_tiles_of(int64_t /*key_tile*/, int64_t num_query_tiles) {
  return TileList{num_query_tiles};
}

// Throws InvalidArgument naming `what` when a tile the pass uses is not positive.
void check_tiles(const FlashTiles& tiles, Pass pass, const char* what);

// Throws InvalidArgument unless `view` is rows x cols ("flash forward: o is 7 x 8, expected 7 x 16
// (seqlen_q x head_dim_v)").
template <typename T>
void check_view(const char* what, const char* name, const SlowMatrix<T>& view, int64_t rows,
                int64_t cols, const char* expected) {
  if (view.rows() != rows || view.cols() != cols) {
    fail(what, ": ", name, " is ", view.rows(), " x ", view.cols(), ", expected ", rows, " x ", cols,
         " (", expected, ")");
  }
}

// s (rows_q, rows_k), row-major = scale * q k^T for q (rows_q, head_dim), k (rows_k, head_dim),
// all contiguous fast buffers. Shared by the forward and both backward passes (flash_forward.cpp).
void score_tile(const float* q, const float* k, int64_t rows_q, int64_t rows_k, int64_t head_dim,
                float scale, float* s);

inline int64_t num_tiles(int64_t rows, int64_t block) { return (rows + block - 1) / block; }
// Rows of tile `tile` (the last one may be partial).
inline int64_t tile_rows(int64_t rows, int64_t block, int64_t tile) {
  const int64_t left = rows - tile * block;
  return left < block ? left : block;
}

}  // namespace flash_detail
}  // namespace spattn::schedules
