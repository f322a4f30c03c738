// The tiled matrix product schedule, its tile choice and its exact prediction (tiled_matmul.hpp).
#include "schedules/common/tiled_matmul.hpp"

#include "schedules/common/dense_lines.hpp"

#include "cpu/kernels/small_cache_kernels.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <ostream>

namespace spattn::schedules {
namespace {

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

void check_tiles(const char* where, const MatmulTiles& tiles) {
  if (tiles.tile_m < 1 || tiles.tile_n < 1 || tiles.tile_k < 1) {
    fail(where, ": tiles must be at least 1, got tile_m ", tiles.tile_m, ", tile_n ", tiles.tile_n,
         ", tile_k ", tiles.tile_k);
  }
  if ((tiles.carry_a || tiles.carry_b) && tiles.carry_line_words < 1) {
    fail(where, ": a line carry needs its line size, got carry_line_words ", tiles.carry_line_words);
  }
}

// The carry keeps what the layout stores along k: op(A) row-major, op(B) transposed.
void check_carry(const char* where, const MatmulTiles& tiles, MatmulLayout layout) {
  if ((tiles.carry_a && layout.a_transposed) || (tiles.carry_b && !layout.b_transposed)) {
    fail(where, ": the tiles carry lines of ", tiles.carry_a && layout.a_transposed ? "op(A)" : "op(B)",
         ", which this layout does not store along k");
  }
}

}  // namespace

int64_t tiled_matmul_carry_words(const MatmulTiles& tiles) {
  return ((tiles.carry_a ? tiles.tile_m : 0) + (tiles.carry_b ? tiles.tile_n : 0)) * tiles.carry_line_words;
}

int64_t tiled_matmul_fast_words(const MatmulTiles& tiles) {
  return tiles.tile_m * tiles.tile_n + tiles.tile_m * tiles.tile_k + tiles.tile_k * tiles.tile_n +
         tiled_matmul_carry_words(tiles);
}

IoCount predict_tiled_matmul(int64_t a, int64_t k, int64_t b, const MatmulTiles& tiles,
                             bool accumulate) {
  check_tiles("predict_tiled_matmul", tiles);
  const int64_t row_blocks = ceil_div(a, tiles.tile_m);
  const int64_t col_blocks = ceil_div(b, tiles.tile_n);
  const bool retain = tiles.tile_k >= k;
  IoCount count;
  count.reads = k * b * row_blocks;                                    // op(B), once per row block
  if (col_blocks > 0) count.reads += a * k * (retain ? 1 : col_blocks);  // op(A)
  if (accumulate) count.reads += a * b;                                 // C, once
  count.writes = a * b;
  return count;
}

IoCount predict_tiled_matmul_lines(int64_t a, int64_t k, int64_t b, const MatmulTiles& tiles,
                                   MatmulLayout layout, int64_t line_words, bool accumulate) {
  check_tiles("predict_tiled_matmul_lines", tiles);
  check_carry("predict_tiled_matmul_lines", tiles, layout);
  io::check_line_words("predict_tiled_matmul_lines", line_words);
  const int64_t row_blocks = ceil_div(a, tiles.tile_m);
  const int64_t col_blocks = ceil_div(b, tiles.tile_n);
  const bool retain = tiles.tile_k >= k;
  const int64_t c_lines = dense_grid_lines(a, b, tiles.tile_m, tiles.tile_n, line_words);
  // A carried operand's chunks move each stored row's lines once, as one chunk of all of k.
  const int64_t whole_k = std::max<int64_t>(k, 1);
  const int64_t b_chunk = tiles.carry_b ? whole_k : tiles.tile_k;
  const int64_t a_chunk = tiles.carry_a ? whole_k : tiles.tile_k;
  IoCount count;
  count.reads = row_blocks * dense_grid_lines(k, b, b_chunk, tiles.tile_n, line_words, layout.b_transposed);
  if (col_blocks > 0) {
    count.reads += (retain ? 1 : col_blocks) *
                   dense_grid_lines(a, k, tiles.tile_m, a_chunk, line_words, layout.a_transposed);
  }
  if (accumulate) count.reads += c_lines;
  count.writes = c_lines;
  return count;
}

void tiled_matmul(io::FastMemory& fast, const MatmulInput& a, const MatmulInput& b,
                  const MatmulOutput& c, const MatmulTiles& tiles, const MatmulOptions& options) {
  check_tiles("tiled_matmul", tiles);
  const int64_t rows_a = a.matrix.rows();
  const int64_t inner = a.matrix.cols();
  const int64_t cols_b = b.matrix.cols();
  if (b.matrix.rows() != inner) {
    fail("tiled_matmul: op(A) is ", rows_a, " x ", inner, " but op(B) is ", b.matrix.rows(), " x ",
         cols_b, " (inner dimensions differ)");
  }
  if (c.matrix.rows() != rows_a || c.matrix.cols() != cols_b) {
    fail("tiled_matmul: C is ", c.matrix.rows(), " x ", c.matrix.cols(), ", op(A) op(B) is ",
         rows_a, " x ", cols_b);
  }
  if (options.first_row_block < 0 || options.row_block_step < 1) {
    fail("tiled_matmul: first_row_block ", options.first_row_block,
         " must be >= 0 and row_block_step ", options.row_block_step, " >= 1");
  }
  // A carried operand continues each chunk from the line the chunk before ended on: it must be
  // stored along k (op(A) along its columns, op(B) along its rows). CSR operands move without one.
  if (tiles.carry_a && !a.matrix.is_csr() && a.matrix.stored_along() != io::StoredAlong::cols) {
    fail("tiled_matmul: the tiles carry lines of op(A), which is not stored along k");
  }
  if (tiles.carry_b && !b.matrix.is_csr() && b.matrix.stored_along() != io::StoredAlong::rows) {
    fail("tiled_matmul: the tiles carry lines of op(B), which is not stored along k");
  }
  const int64_t tile_m = tiles.tile_m;
  const int64_t tile_n = tiles.tile_n;
  const int64_t tile_k = tiles.tile_k;
  const bool retain = tile_k >= inner;
  MatmulHooks no_hooks;
  MatmulHooks& hooks = options.hooks != nullptr ? *options.hooks : no_hooks;

  auto c_tile = fast.allocate<float>(tile_m * tile_n, "tiled_matmul C tile");  // (tile_m, tile_n)
  auto a_chunk = fast.allocate<float>(tile_m * tile_k, "tiled_matmul A chunk");  // (tile_m, tile_k)
  // (tile_k, tile_n), or (tile_n, tile_k) when the tile is narrower than the kernels' vectors: the
  // same words, loaded from the transposed view, so that the kernel runs dot products along k.
  auto b_chunk = fast.allocate<float>(tile_k * tile_n, "tiled_matmul B chunk");
  // The carried lines' words. The lines stay where they are (natively in the hardware cache,
  // which keeps them as the next chunk reads on); the model's fast memory holds their words.
  auto carry = fast.allocate<float>(tiled_matmul_carry_words(tiles), "tiled_matmul line carry");
  const bool b_transposed = small_cache_kernels::prefers_transposed_b(std::min(tile_n, cols_b));
  const SlowMatrix<const float> b_transpose = b.matrix.transposed();

  small_cache_kernels::Product product;
  product.a = a_chunk.data();
  product.lda = tile_k;
  product.b = b_chunk.data();
  product.ldb = b_transposed ? tile_k : tile_n;
  product.b_transposed = b_transposed;
  product.c = c_tile.data();
  product.ldc = tile_n;
  // Accumulating into loaded C values needs alpha on each product; otherwise alpha is applied
  // once to the finished tile.
  product.alpha = options.accumulate ? options.alpha : 1.0f;
  for (int64_t row0 = options.first_row_block * tile_m; row0 < rows_a;
       row0 += options.row_block_step * tile_m) {
    const int64_t rows = std::min(tile_m, rows_a - row0);
    hooks.begin_row_block(fast, row0, rows);
    for (int64_t col0 = 0; col0 < cols_b; col0 += tile_n) {
      const int64_t cols = std::min(tile_n, cols_b - col0);
      if (options.accumulate) {
        fast.load(c.operand, c.matrix, row0, col0, rows, cols, c_tile, 0, tile_n);
      } else {
        std::fill(c_tile.data(), c_tile.data() + rows * tile_n, 0.0f);
      }
      for (int64_t k0 = 0; k0 < inner; k0 += tile_k) {
        const int64_t depth = std::min(tile_k, inner - k0);
        if (!retain || col0 == 0) {
          if (tiles.carry_a && k0 > 0) {
            fast.load_continued(a.operand, a.matrix, row0, k0, rows, depth, a_chunk, 0, tile_k);
          } else {
            fast.load(a.operand, a.matrix, row0, k0, rows, depth, a_chunk, 0, tile_k);
          }
          hooks.transform_a(row0, k0, rows, depth, a_chunk.data(), tile_k);
        }
        const bool continue_b = tiles.carry_b && k0 > 0;
        if (b_transposed) {
          if (continue_b) {
            fast.load_continued(b.operand, b_transpose, col0, k0, cols, depth, b_chunk, 0, tile_k);
          } else {
            fast.load(b.operand, b_transpose, col0, k0, cols, depth, b_chunk, 0, tile_k);
          }
        } else if (continue_b) {
          fast.load_continued(b.operand, b.matrix, k0, col0, depth, cols, b_chunk, 0, tile_n);
        } else {
          fast.load(b.operand, b.matrix, k0, col0, depth, cols, b_chunk, 0, tile_n);
        }
        product.rows = rows;
        product.depth = depth;
        product.cols = cols;
        small_cache_kernels::multiply_add(product);
      }
      if (!options.accumulate && options.alpha != 1.0f) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t col = 0; col < cols; ++col) c_tile[r * tile_n + col] *= options.alpha;
        }
      }
      hooks.finish_tile(fast, row0, col0, rows, cols, c_tile.data(), tile_n, b_chunk);
      fast.store(c.operand, c_tile, 0, tile_n, c.matrix, row0, col0, rows, cols);
    }
    hooks.end_row_block(fast, row0, rows);
  }
}

std::ostream& operator<<(std::ostream& out, const MatmulTiles& tiles) {
  out << tiles.tile_m << " x " << tiles.tile_n << ", chunk " << tiles.tile_k;
  if (tiles.carry_line_words > 0) {
    out << ", carry " << tiles.carry_line_words << (tiles.carry_a ? " A" : "") << (tiles.carry_b ? " B" : "");
  }
  return out;
}

}  // namespace spattn::schedules
