// The I/O-optimal tiled matrix product (Hong and Kung; theory.md section 4), as a schedule on the
// two-level memory of io.hpp, with an exact closed-form prediction of the words it moves.
//
//   C = alpha * op(A) * op(B)            (or C += alpha * op(A) * op(B) with accumulate)
//   op(A): (a, k)   op(B): (k, b)   C: (a, b)
//
// op() is whatever view the caller passes: SlowMatrix::transposed() gives A^T without a copy.
//
// Schedule: output tiles of tile_m x tile_n held in fast memory; for each one the inner dimension
// is streamed in chunks of tile_k (an A chunk tile_m x tile_k and a B chunk tile_k x tile_n), then
// the tile is stored once. Row blocks are the outer loop, so per-row state of a caller (row
// statistics) can stay resident across a row block. When one chunk covers all of k
// (tile_k >= k) the A panel of a row block is loaded once and kept for all its output tiles.
//
// Words moved, exactly (na = ceil(a / tile_m), nb = ceil(b / tile_n), retain = tile_k >= k):
//   reads  = k * b * na  +  (nb == 0 ? 0 : a * k * (retain ? 1 : nb))  +  (accumulate ? a * b : 0)
//   writes = a * b
// Fast memory: tile_m * tile_n + tile_m * tile_k + tile_k * tile_n words, plus the line carry
// (below), plus what the hooks allocate (the caller allocates those before the call).
//
// Line carry. When lines are counted and a chunk of k is not a whole number of lines, consecutive
// chunks of an operand stored along k (op(A) row-major, op(B) a transposed view) share a line in
// every stored row: the chunk before ended on it. With a carry (chosen with the tiles), the
// schedule keeps that line in fast memory for the next chunk, carry_line_words words per row of
// the A chunk (carry_a) and per column of the B chunk (carry_b), and the next chunk does not move it
// again (FastMemory::load_continued). A real cache keeps that line just so; without the carry the
// model would count it twice.
//
// Lines moved (io.hpp's line model, lines of L words), exactly, for operands that are dense
// row-major arrays or transposed views of one (MatmulLayout), with G(view, tile) = io::grid_lines
// over the view tiled by the tile:
//   reads  = na * G(op(B), (carry_b ? k : tile_k) x tile_n)
//            + (retain ? 1 : nb) * G(op(A), tile_m x (carry_a ? k : tile_k))
//            + (accumulate ? G(C, tile_m x tile_n) : 0)
//   writes = G(C, tile_m x tile_n)
// A row-major view's tile costs rows * (lines its columns span); a transposed one's cols * (lines
// its rows span). Tiles whose contiguous side is a multiple of L cost words / L. With a carry, the
// chunks of a stored row move that row's lines once, as one chunk of all of k would.
//
// Hooks fuse elementwise steps into the product where that saves passes over slow memory: a
// transform of each loaded A chunk (P = exp(S - lse) as S is loaded), and an epilogue on
// each finished output tile before it is stored (dS = P ∘ (dP - D) as dP is finished). Their own
// moves are the caller's to predict.
#pragma once

#include "schedules/common/head_problem.hpp"

#include <spattn/io.hpp>

#include <cstdint>
#include <iosfwd>

namespace spattn::schedules {

struct MatmulTiles {
  int64_t tile_m = 1;  // output tile rows
  int64_t tile_n = 1;  // output tile columns
  int64_t tile_k = 1;  // inner-dimension chunk
  // The line carry (above): the line size it keeps, 0 for none, and which operands it keeps.
  int64_t carry_line_words = 0;
  bool carry_a = false;
  bool carry_b = false;
  friend bool operator==(const MatmulTiles& a, const MatmulTiles& b) {
    return a.tile_m == b.tile_m && a.tile_n == b.tile_n && a.tile_k == b.tile_k &&
           a.carry_line_words == b.carry_line_words && a.carry_a == b.carry_a && a.carry_b == b.carry_b;
  }
};
// "tile_m x tile_n, chunk tile_k", and the carry when there is one.
std::ostream& operator<<(std::ostream& out, const MatmulTiles& tiles);

// How op(A) and op(B) lie in slow memory, for the line counts: a dense row-major array, or the
// transposed view of one (K^T in S = Q K^T, dS^T in dK = dS^T Q). C is row-major.
struct MatmulLayout {
  bool a_transposed = false;
  bool b_transposed = false;
};

struct MatmulInput {
  io::Operand operand;               // what the ledger books the reads to
  SlowMatrix<const float> matrix;    // op(A) (a, k) or op(B) (k, b)
};

struct MatmulOutput {
  io::Operand operand;
  SlowMatrix<float> matrix;          // C (a, b)
};

// Fusion points. Coordinates are those of op(A), op(B) and C; tiles are row-major with leading
// dimension ld. Every fast buffer a hook uses must be allocated before tiled_matmul is called.
class MatmulHooks {
 public:
  virtual ~MatmulHooks() = default;
  // Before the first output tile of C rows [row0, row0 + rows) (also when b == 0).
  virtual void begin_row_block(io::FastMemory& /*fast*/, int64_t /*row0*/, int64_t /*rows*/) {}
  // On a freshly loaded chunk of op(A), in place. (The B chunk has no hook: its layout in fast
  // memory is the kernels' choice, row-major or transposed.)
  virtual void transform_a(int64_t /*row0*/, int64_t /*col0*/, int64_t /*rows*/, int64_t /*cols*/,
                           float* /*chunk*/, int64_t /*ld*/) {}
  // On a finished output tile (alpha applied, accumulation done), just before it is stored.
  // `scratch` is the B chunk buffer (tile_k * tile_n words, at least tile_n), free at this point.
  virtual void finish_tile(io::FastMemory& /*fast*/, int64_t /*row0*/, int64_t /*col0*/,
                           int64_t /*rows*/, int64_t /*cols*/, float* /*tile*/, int64_t /*ld*/,
                           io::FastBuffer<float>& /*scratch*/) {}
  // After the last output tile of the row block.
  virtual void end_row_block(io::FastMemory& /*fast*/, int64_t /*row0*/, int64_t /*rows*/) {}
};

struct MatmulOptions {
  float alpha = 1.0f;
  bool accumulate = false;          // C += alpha op(A) op(B): C is read once (a * b more reads)
  MatmulHooks* hooks = nullptr;
  // One worker's share of the product: the row blocks first_row_block, first_row_block +
  // row_block_step, ... (row blocks are independent: each output tile is computed, and its
  // operands loaded, exactly as in the whole product). The default is the whole product.
  int64_t first_row_block = 0;
  int64_t row_block_step = 1;
};

// Words the product itself holds in fast memory, the line carry included.
int64_t tiled_matmul_fast_words(const MatmulTiles& tiles);

// Words of the line carry alone.
int64_t tiled_matmul_carry_words(const MatmulTiles& tiles);

// The smallest M for which choose_matmul_tiles succeeds: a 1 x 1 tile, one word of A and of B,
// and `row_words` per tile row for the caller's hooks.
inline int64_t tiled_matmul_min_cache_words(int64_t row_words = 0) { return 3 + row_words; }

// The exact words tiled_matmul moves (formula above); hooks' own moves excluded.
IoCount predict_tiled_matmul(int64_t a, int64_t k, int64_t b, const MatmulTiles& tiles,
                             bool accumulate = false);

// The exact lines tiled_matmul moves (formula above) with its operands laid out as `layout` says;
// hooks' own moves excluded.
IoCount predict_tiled_matmul_lines(int64_t a, int64_t k, int64_t b, const MatmulTiles& tiles,
                                   MatmulLayout layout, int64_t line_words, bool accumulate = false);

// Runs the schedule. Throws InvalidArgument on inconsistent shapes, tiles below 1 or a carry of an
// operand that is not stored along k (nothing written), RuntimeError from FastMemory when the
// buffers do not fit.
void tiled_matmul(io::FastMemory& fast, const MatmulInput& a, const MatmulInput& b,
                  const MatmulOutput& c, const MatmulTiles& tiles,
                  const MatmulOptions& options = {});

}  // namespace spattn::schedules
