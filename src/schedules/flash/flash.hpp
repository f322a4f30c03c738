// The flash schedule: FlashAttention-style tiling for the large-cache regime (theory.md section 4),
// fp32, forward and backward, dense or over a block-sparse mask (a FlashMask, flash_mask.hpp),
// with an exact count of the words it moves. docs/flash.md derives the dense formulas below,
// docs/block_sparse.md the masked ones.
//
// Every loop nest keeps one tile resident (the outer tile) and streams the other operand through
// it in tiles of a few rows (the inner tile):
//
//   forward               per query tile (block_q rows):   stream key tiles (block_k rows)
//   backward D pre-pass   per query tile (block_q rows):   D = rowsum(dO ∘ O), written to slow
//   backward dK/dV pass   per key tile (dkdv_block_k rows): stream query tiles (dkdv_block_q rows)
//   backward dQ pass      per query tile (block_q rows):   stream key tiles (block_k rows)
// or, with FlashTiles::dq_in_dkdv, no dQ pass: the dK/dV pass adds each tile's dS K_j to dQ_i in
// slow memory (flash_backward_fused.cpp).
//
// The words moved depend on the outer tile (how often the streamed operand is re-read); the
// inner tile only takes fast memory. flash_tiles() therefore makes the outer tile as large as M
// allows and the inner tile small (docs/flash.md, "Tile choice"). Square tiles would not do:
// with B x B tiles B grows like sqrt(M), not M / d, and the I/O misses Theta(n^2 d^2 / M).
#pragma once

#include "schedules/common/head_problem.hpp"

#include <spattn/error.hpp>

#include <cstdint>
#include <iosfwd>

namespace spattn::schedules {


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
  // The backward's dQ accumulates in the dK/dV pass (flash_backward_fused.cpp): each visited
  // (key tile, query tile) adds dS K_j to dQ_i in slow memory, read and written back, in
  // increasing key-tile order, and there is no dQ pass (block_k is unused: 0). Each product is
  // computed once (5 per pair, against 7 with the dQ pass). A 16-bit dQ keeps its sums in float32
  // until each query tile's last term (flash_dq_partials.hpp).
  bool dq_in_dkdv = false;

  friend bool operator==(const FlashTiles& a, const FlashTiles& b) {
    return a.block_q == b.block_q && a.block_k == b.block_k && a.dkdv_block_q == b.dkdv_block_q &&
           a.dkdv_block_k == b.dkdv_block_k && a.dq_in_dkdv == b.dq_in_dkdv;
  }
};
// "block_q b_q, block_k b_k" and, when set (the backward's), ", dkdv_block_q c_q, dkdv_block_k c_k".
std::ostream& operator<<(std::ostream& out, const FlashTiles& tiles);

// Whether a run walks a block-sparse mask (a FlashMask, flash_mask.hpp) or is dense
// (mask == nullptr: every tile visited, no index word moved). A masked run keeps a few index
// buffers resident next to the tiles, so its tile choice reserves room for them.
enum class FlashMasking : uint8_t { dense, block_sparse };

// The index words a masked run keeps resident in each masked loop nest (on top of the tiles):
//   3 (the list header: run_ptr pair, partial_ptr) + kFlashListChunk (a chunk of the list's runs,
//   2 words a run) + ceil(outer * inner / 64) (the bit set of one partial tile, one word per 64 bits).
inline constexpr int64_t kFlashListChunk = 16;
static_assert(kFlashListChunk % 2 == 0, "a chunk holds whole runs of 2 words");
int64_t flash_mask_resident_words(int64_t outer_rows, int64_t inner_rows);

// The words resident in fast memory while the schedule runs with these tiles: the peak, exactly
// (the largest over the loop nests of a pass; each nest allocates its buffers once, before its
// loops). With d = head_dim, e = head_dim_v, (bq, bk) = (block_q, block_k), (cq, ck) = the dkdv
// tiles:
//   forward      bq (d + e + 2) + bk (d + e) + bq bk        Q, O acc, max, sum | K, V | S/P
//   D pre-pass   bq (2 e + 1)                               O, dO, D
//   dK/dV pass   ck (2 d + 2 e) + cq (d + e + 2) + cq ck    K, V, dK, dV | Q, dO, LSE, D | P/dS
//   dQ pass      bq (2 d + e + 2) + bk (d + e) + bq bk      Q, dO, LSE, D, dQ | K, V | P/dS
//   fused dK/dV  ck (3 d + 2 e) + cq (2 d + e + 2) + 2 cq ck  K^T, K c, V, dK, dV | Q, dO, dQ,
//                                                          LSE, D | P/dS, dS^T  (dq_in_dkdv)
// block_sparse adds flash_mask_resident_words(bq, bk) to the forward and dQ nests and
// flash_mask_resident_words(ck, cq) to the dK/dV nest (the D pre-pass reads no mask).
// Throws InvalidArgument when a tile the pass uses is not positive.
int64_t flash_resident_words(const HeadShape& shape, const FlashTiles& tiles, Pass pass,
                             FlashMasking masking = FlashMasking::dense);

// The smallest M for which 1 x 1 tiles fit (independent of the sequence lengths):
//   forward   2 d + 2 e + 3
//   backward  3 d + 3 e + 3   (the dK/dV pass; the dQ pass needs 3 d + 2 e + 3, D 2 e + 1)
// e.g. 387 words for the backward at d = e = 64. block_sparse adds 3 + 16 + 1 = 20 words.
// With dq_in_dkdv (the backward only) the fused dK/dV pass: 5 d + 3 e + 4 (K^T, V^T, K, dK, dV |
// Q, dO, dQ, LSE, D | P/dS, dS^T).
int64_t flash_min_cache_words(const HeadShape& shape, Pass pass,
                              FlashMasking masking = FlashMasking::dense, bool dq_in_dkdv = false);

// The exact words moved by flash_forward / flash_backward with these tiles, in O(1) arithmetic.
// With n_q = seqlen_q, n_k = seqlen_k, T(n, b) = ceil(n / b), and both seqlens positive:
//   forward  reads  n_q d + T(n_q, bq) n_k (d + e)
//            writes n_q (e + 1)
//   backward reads  2 n_q e                                    D pre-pass: O, dO
//                 + n_k (d + e) + T(n_k, ck) n_q (d + e + 2)   dK/dV pass: K, V | Q, dO, LSE, D
//                 + n_q (d + e + 2) + T(n_q, bq) n_k (d + e)   dQ pass: Q, dO, LSE, D | K, V
//            writes n_q + n_k (d + e) + n_q d                  D, dK, dV, dQ
// With dq_in_dkdv (T = T(n_k, ck)): the dQ pass's terms give way to dQ read T - 1 and written T
// times: reads 2 n_q e + n_k (d + e) + T n_q (d + e + 2) + (T - 1) n_q d, writes n_q + n_k (d + e)
// + T n_q d (docs/flash.md, "How dQ is accumulated").
// When a seqlen is 0 nothing is read and only the (zero / -inf) outputs are written.
// With a FlashMask (built for this pass and these tiles) the counts are sums over the mask's
// tile lists, O(1) per outer tile (no run); docs/block_sparse.md derives them. The IoCount is values +
// indices; predict_flash_*_words gives them apart.
struct FlashMask;
IoCount predict_flash_forward(const HeadShape& shape, const FlashTiles& tiles,
                              const FlashMask* mask = nullptr);
IoCount predict_flash_backward(const HeadShape& shape, const FlashTiles& tiles,
                               const FlashMask* mask = nullptr);

// The dense schedule's exact lines of `line_words` words (io.hpp's rule; docs/io_model.md), for
// operands that are dense row-major arrays of their head (row stride = width): every tile of Q,
// K, V, O, dO and the gradients is whole rows, ceil(width / L) lines each, and LSE and D move as
// runs of a vector. O(1). Throws like predict_flash_*.
IoCount predict_dense_forward_lines(const HeadShape& shape, const FlashTiles& tiles, int64_t line_words);
IoCount predict_dense_backward_lines(const HeadShape& shape, const FlashTiles& tiles, int64_t line_words);

// Value words (Q, K, V, O, ... entries) and index words (mask structure: tile lists and in-tile
// bits, io::Operand::mask) predicted apart. indices is zero when mask == nullptr.
struct FlashWords {
  IoCount values;
  IoCount indices;
  IoCount total() const { return values + indices; }
};
FlashWords predict_flash_forward_words(const HeadShape& shape, const FlashTiles& tiles,
                                       const FlashMask* mask);
FlashWords predict_flash_backward_words(const HeadShape& shape, const FlashTiles& tiles,
                                        const FlashMask* mask);

// The same in lines of `line_words` words (io.hpp's rule), for operands that are dense row-major
// arrays of their head: the dense formulas when mask == nullptr, else sums over the mask's tile
// lists, O(outer tiles + stored tiles): every row tile costs ceil(width / L) lines a row (a
// width-1 operand is a vector), LSE and D runs of a vector, and the lists' header, entry chunks and
// bit sets their runs (indices).
FlashWords predict_flash_forward_lines(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                       int64_t line_words);
FlashWords predict_flash_backward_lines(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                        int64_t line_words);

// Run the schedule: every buffer is allocated from `fast` once per loop nest, every operand moves
// with fast.load / fast.store (counted when `fast` has a ledger). The shape comes from the views;
// throws InvalidArgument on inconsistent views or non-positive tiles (before writing anything);
// a mask built for another shape, pass or tiles is a caller's bug (asserted), RuntimeError (from FastMemory) when the tiles do
// not fit in M. mask == nullptr is the dense schedule (every pair attends); otherwise only the
// mask's stored tiles are visited, partial tiles apply their element bits, and the mask structure
// moves as index words (docs/block_sparse.md).
void flash_forward(io::FastMemory& fast, const HeadForward& problem, const FlashTiles& tiles,
                   const FlashMask* mask = nullptr);
void flash_backward(io::FastMemory& fast, const HeadBackward& problem, const FlashTiles& tiles,
                    const FlashMask* mask = nullptr);

// The shape of a problem, read from its views (no validation).
HeadShape head_shape(const HeadForward& problem);
HeadShape head_shape(const HeadBackward& problem);

namespace flash_detail {

// Which tiles a loop visits is decided by a TileWalker (flash_mask.hpp: key_tiles_of,
// query_tiles_of), the one plug point between the dense and the block-sparse schedule.

// Throws InvalidArgument naming `what` when a tile the pass uses is not positive.
void check_tiles(const FlashTiles& tiles, Pass pass, const char* what);

// One loop nest's tiles (flash.hpp's table): forward (block_q, block_k), the backward's dQ pass
// (block_q, block_k) and dK/dV pass (dkdv_block_k, dkdv_block_q), as (outer, inner); fused_dkdv is
// the dK/dV pass that also accumulates dQ (FlashTiles::dq_in_dkdv).
enum class FlashNest : uint8_t { forward, dq, dkdv, fused_dkdv };
struct NestTiles {
  int64_t outer = 0;
  int64_t inner = 0;
};
// The dense counts of flash.hpp's formulas (values only), O(1); throw InvalidArgument on negative
// shapes or non-positive tiles.
IoCount predict_dense_forward(const HeadShape& shape, const FlashTiles& tiles);
IoCount predict_dense_backward(const HeadShape& shape, const FlashTiles& tiles);

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

inline int64_t num_tiles(int64_t rows, int64_t block) { return (rows + block - 1) / block; }
// Rows of tile `tile` (the last one may be partial).
inline int64_t tile_rows(int64_t rows, int64_t block, int64_t tile) {
  const int64_t left = rows - tile * block;
  return left < block ? left : block;
}

}  // namespace flash_detail
}  // namespace spattn::schedules
