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

MatmulTiles choose_matmul_tiles(int64_t a, int64_t k, int64_t b, int64_t cache_words,
                                int64_t row_words, MatmulLayout layout, int64_t line_words,
                                int64_t carry_room) {
  io::check_line_words("choose_matmul_tiles", line_words);
  if (a < 0 || k < 0 || b < 0 || row_words < 0 || carry_room < 0) {
    fail("choose_matmul_tiles: sizes must be non-negative, got a ", a, ", k ", k, ", b ", b,
         ", row_words ", row_words, ", carry_room ", carry_room);
  }
  const int64_t minimum = tiled_matmul_min_cache_words(row_words);
  if (cache_words < minimum) {
    fail("choose_matmul_tiles: fast memory M = ", cache_words, " words is below the minimum ",
         minimum, " (a 1 x 1 output tile, one word of A and of B, ", row_words,
         " row words for the hooks)");
  }
  // Tiles larger than the matrix buy nothing; keep each at least 1 so empty sizes still work.
  const int64_t max_m = std::max<int64_t>(a, 1);
  const int64_t max_n = std::max<int64_t>(b, 1);
  const int64_t max_k = std::max<int64_t>(k, 1);

  MatmulTiles best;
  int64_t best_lines = -1;
  int64_t best_reads = -1;
  // Fewest lines, then fewest word reads; among tiles equal in both, the one with the longer
  // chunk, then the larger tile: a longer chunk lets the kernel keep each output in a register
  // over more of k (a chunk of 1 adds every product term to the C tile in memory), and costs
  // nothing.
  const auto better = [&](const MatmulTiles& tiles, int64_t lines, int64_t reads) {
    if (best_lines < 0) return true;
    if (lines != best_lines) return lines < best_lines;
    if (reads != best_reads) return reads < best_reads;
    if (tiles.tile_k != best.tile_k) return tiles.tile_k > best.tile_k;
    return tiles.tile_m * tiles.tile_n > best.tile_m * best.tile_n;
  };
  // The tiles and the hooks' rows within cache_words; a carry in what they leave plus carry_room.
  const auto fits_memory = [&](const MatmulTiles& tiles) {
    const int64_t carry = tiled_matmul_carry_words(tiles);
    const int64_t left = cache_words - (tiled_matmul_fast_words(tiles) - carry) - row_words * tiles.tile_m;
    return left >= 0 && carry <= left + carry_room;
  };
  const auto consider_one = [&](const MatmulTiles& tiles) {
    if (!fits_memory(tiles)) return;
    const int64_t reads = predict_tiled_matmul(a, k, b, tiles).reads;
    const int64_t lines = line_words == 1
                              ? reads
                              : predict_tiled_matmul_lines(a, k, b, tiles, layout, line_words).total();
    if (better(tiles, lines, reads)) {
      best = tiles;
      best_lines = lines;
      best_reads = reads;
    }
  };
  // The operands a carry would keep for these tiles: those stored along k, when chunks of k
  // split lines (tiled_matmul.hpp, "Line carry"), and only chunks of at least half a line: a
  // shorter chunk leaves the kernels' register blocks along k idle (chunks of 1 with a carry ran
  // small_cache 1.2x to 3.3x slower at n 1024, d 64, M 1024 to 12288), a cost the lines do not
  // show.
  const auto with_carry = [&](MatmulTiles tiles, bool carry) {
    tiles.carry_a = carry && !layout.a_transposed;
    tiles.carry_b = carry && layout.b_transposed;
    tiles.carry_line_words = tiles.carry_a || tiles.carry_b ? line_words : 0;
    return tiles;
  };
  const auto carried = [&](const MatmulTiles& tiles) {
    return with_carry(tiles, line_words > 1 && tiles.tile_k < k && tiles.tile_k % line_words != 0 &&
                                 2 * tiles.tile_k >= line_words);
  };
  // Each candidate without a carry and, where one applies, with it.
  const auto evaluate = [&](const MatmulTiles& tiles) {
    consider_one(with_carry(tiles, false));
    const MatmulTiles carrying = carried(tiles);
    if (carrying.carry_line_words > 0) consider_one(carrying);
  };
  // The chunk takes the memory the tile, the hooks and `reserve` words leave, up to all of k (at
  // least the chunk given).
  const auto fill_chunk = [&](MatmulTiles tiles, int64_t reserve = 0) {
    const int64_t avail = cache_words - row_words * tiles.tile_m - reserve;
    tiles.tile_k = std::min(max_k, std::max(tiles.tile_k, (avail - tiles.tile_m * tiles.tile_n) /
                                                              (tiles.tile_m + tiles.tile_n)));
    return tiles;
  };
  // The words a carry of these tiles would take from cache_words: a line per row of op(A) and per
  // column of op(B) where they are stored along k, less the carry_room beside cache_words.
  const auto carry_reserve = [&](const MatmulTiles& tiles) {
    if (line_words == 1) return int64_t{0};
    return std::max<int64_t>(tiled_matmul_carry_words(with_carry(tiles, true)) - carry_room, 0);
  };
  // A side rounded down to whole lines, where it is at least a line and not the whole matrix.
  const auto whole_lines = [&](int64_t side, int64_t whole) {
    return side >= line_words && side < whole ? side / line_words * line_words : side;
  };
  const auto consider = [&](MatmulTiles tiles) {
    // The same numbers of row and column blocks with tiles split evenly: the same word reads
    // (they depend only on those counts and on retention, which a longer chunk keeps), and the
    // memory freed goes to the chunk.
    MatmulTiles even = tiles;
    even.tile_m = ceil_div(max_m, ceil_div(max_m, tiles.tile_m));
    even.tile_n = ceil_div(max_n, ceil_div(max_n, tiles.tile_n));
    evaluate(fill_chunk(even));
    if (carry_reserve(even) > 0) {
      // The chunk that leaves room for a carry (from a chunk of 1: the carry may need a shorter
      // one than the tiles came with).
      MatmulTiles shorter = even;
      shorter.tile_k = 1;
      evaluate(fill_chunk(shorter, carry_reserve(even)));
    }
    if (line_words == 1) return;
    // Lines also depend on where the tiles start: the tile as it is, with its chunk in whole
    // lines too.
    evaluate(tiles);
    MatmulTiles lined = tiles;
    lined.tile_k = whole_lines(tiles.tile_k, max_k);
    evaluate(lined);
  };
  // In lines, the widest tile of a height that leaves room for a line carry at the shortest chunk
  // that takes one (half a line), its chunk then grown into what is left. The widest tile of a
  // height may leave no room for a carry: below the tall cache (M < 4 L^2) its chunks are then a
  // fraction of a line and move every line once per chunk (n 512, d 64, M 512: the backward's P
  // at 9x16x4 moved 745,472 lines, at 3x16x8 with a carry 432,128), and at M = 2048 it moved 4 %
  // more lines than 18x32x8 with a carry. Only tiles at least a line wide: narrower ones leave
  // the kernels' vectors part empty (9x8x8 with a carry, the fewest lines at M 512, ran the
  // backward 3.4x slower), so below the tall cache the choice is not the fewest lines of all.
  const auto try_carry_width = [&](int64_t tile_m) {
    const int64_t chunk = (line_words + 1) / 2;
    if (line_words == 1 || chunk >= max_k) return;
    const MatmulTiles probe = with_carry({tile_m, 1, chunk}, true);
    if (!probe.carry_a && !probe.carry_b) return;
    const int64_t a_line = probe.carry_a ? line_words : 0;
    const int64_t b_line = probe.carry_b ? line_words : 0;
    const int64_t fixed = tile_m * (chunk + row_words);
    // The tiles in cache_words; the tiles and the carry in cache_words + carry_room.
    const int64_t tiles_width = (cache_words - fixed) / (tile_m + chunk);
    const int64_t carry_width = (cache_words + carry_room - fixed - tile_m * a_line) / (tile_m + chunk + b_line);
    const int64_t width = std::min({tiles_width, carry_width, max_n});
    if (width < std::min(line_words, max_n)) return;
    // Split evenly (the same blocks, the chunk gets what is freed) or aligned to lines; the
    // grown chunk as it is and in whole lines (each once where the two agree).
    const auto try_width = [&](int64_t tile_n) {
      const MatmulTiles tiles{tile_m, tile_n, chunk};
      MatmulTiles filled = fill_chunk(tiles, carry_reserve(tiles));
      evaluate(filled);
      const int64_t lined_chunk = std::max(chunk, whole_lines(filled.tile_k, max_k));
      if (lined_chunk == filled.tile_k) return;
      filled.tile_k = lined_chunk;
      evaluate(filled);
    };
    const int64_t even = ceil_div(max_n, ceil_div(max_n, width));
    const int64_t lined = whole_lines(width, max_n);
    try_width(even);
    if (lined != even) try_width(lined);
  };
  // For each tile height, the widest tile that fits is the best of that height in words (reads
  // never grow with tile_n); in lines, that width rounded down to whole lines too. Two chunk
  // policies: the shortest chunk (widest tile; the chunk then takes what is left), and the whole
  // of k (the A panel stays resident across the row block). Returns false when no tile of this
  // height fits (a taller one fits even less).
  const auto try_height = [&](int64_t tile_m) {
    try_carry_width(tile_m);
    const int64_t avail = cache_words - row_words * tile_m;
    // tile_m * tile_n + tile_m * 1 + 1 * tile_n <= avail
    int64_t tile_n = (avail - tile_m) / (tile_m + 1);
    if (tile_n < 1) return false;
    tile_n = std::min(tile_n, max_n);
    // tile_m * tile_n + tile_m * k + k * tile_n <= avail
    const int64_t panel_n = (avail - tile_m * max_k) / (tile_m + max_k);
    for (const int64_t width : {tile_n, whole_lines(tile_n, max_n)}) {
      consider(fill_chunk({tile_m, width, 1}));
      if (panel_n >= 1) {
        const int64_t panel_width = std::min(panel_n, max_n);
        consider({tile_m, width == tile_n ? panel_width : whole_lines(panel_width, max_n), max_k});
      }
      if (line_words == 1) break;
    }
    return true;
  };
  // Every height up to kEveryHeight; above it only the heights that split the rows evenly into
  // fewer blocks, ceil(max_m / blocks): among the heights of one block count that one leaves the
  // most memory for the width, and evenly split the others come to the same tiles. This keeps a
  // tall matrix's search to O(sqrt(a)) heights (a plan at n = 10^6 searches its switch M up to
  // 16 n d).
  constexpr int64_t kEveryHeight = 1024;
  const int64_t tallest = std::min(max_m, cache_words);
  const int64_t every = std::min(tallest, kEveryHeight);
  bool fits = true;
  for (int64_t tile_m = 1; tile_m <= every && fits; ++tile_m) fits = try_height(tile_m);
  for (int64_t blocks = ceil_div(max_m, every) - 1; blocks >= 1 && fits; --blocks) {
    const int64_t tile_m = ceil_div(max_m, blocks);
    if (tile_m <= every) continue;
    if (tile_m > tallest) break;
    fits = try_height(tile_m);
  }
  return best;
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
