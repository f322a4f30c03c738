// choose_matmul_tiles (matmul_tile_search.hpp): the search over the tiled product's tiles, as a small
// class whose steps each fit on a screen. Every candidate is priced by the schedule's own exact
// predictions (predict_tiled_matmul, predict_tiled_matmul_lines).
#include "plan/matmul_tile_search.hpp"

#include <spattn/error.hpp>

#include <algorithm>

namespace spattn::schedules {
namespace {

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }

class MatmulTileSearch {
 public:
  MatmulTileSearch(int64_t a, int64_t k, int64_t b, int64_t cache_words, int64_t row_words, MatmulLayout layout,
                   int64_t line_words, int64_t carry_room)
      : a_(a), k_(k), b_(b), cache_words_(cache_words), row_words_(row_words), layout_(layout),
        line_words_(line_words), carry_room_(carry_room), max_m_(std::max<int64_t>(a, 1)),
        max_n_(std::max<int64_t>(b, 1)), max_k_(std::max<int64_t>(k, 1)) {}

  // Every height up to kEveryHeight; above it only the heights that split the rows evenly into
  // fewer blocks, ceil(max_m / blocks): among the heights of one block count that one leaves the
  // most memory for the width, and evenly split the others come to the same tiles. This keeps a
  // tall matrix's search to O(sqrt(a)) heights (a plan at n = 10^6 searches its switch M up to
  // 16 n d).
  MatmulTiles run() {
    constexpr int64_t kEveryHeight = 1024;
    const int64_t tallest = std::min(max_m_, cache_words_);
    const int64_t every = std::min(tallest, kEveryHeight);
    bool fits = true;
    for (int64_t tile_m = 1; tile_m <= every && fits; ++tile_m) fits = try_height(tile_m);
    for (int64_t blocks = ceil_div(max_m_, every) - 1; blocks >= 1 && fits; --blocks) {
      const int64_t tile_m = ceil_div(max_m_, blocks);
      if (tile_m <= every) continue;
      if (tile_m > tallest) break;
      fits = try_height(tile_m);
    }
    return best_;
  }

 private:
  // Fewest lines, then fewest word reads; among tiles equal in both, the one with the longer
  // chunk, then the larger tile: a longer chunk lets the kernel keep each output in a register
  // over more of k (a chunk of 1 adds every product term to the C tile in memory), and costs
  // nothing.
  bool better(const MatmulTiles& tiles, int64_t lines, int64_t reads) const {
    if (best_lines_ < 0) return true;
    if (lines != best_lines_) return lines < best_lines_;
    if (reads != best_reads_) return reads < best_reads_;
    if (tiles.tile_k != best_.tile_k) return tiles.tile_k > best_.tile_k;
    return tiles.tile_m * tiles.tile_n > best_.tile_m * best_.tile_n;
  }

  // The tiles and the hooks' rows within cache_words; a carry in what they leave plus carry_room.
  bool fits_memory(const MatmulTiles& tiles) const {
    const int64_t carry = tiled_matmul_carry_words(tiles);
    const int64_t left = cache_words_ - (tiled_matmul_fast_words(tiles) - carry) - row_words_ * tiles.tile_m;
    return left >= 0 && carry <= left + carry_room_;
  }

  void consider_one(const MatmulTiles& tiles) {
    if (!fits_memory(tiles)) return;
    const int64_t reads = predict_tiled_matmul(a_, k_, b_, tiles).reads;
    const int64_t lines =
        line_words_ == 1 ? reads : predict_tiled_matmul_lines(a_, k_, b_, tiles, layout_, line_words_).total();
    if (better(tiles, lines, reads)) {
      best_ = tiles;
      best_lines_ = lines;
      best_reads_ = reads;
    }
  }

  // The operands a carry would keep for these tiles: those stored along k.
  MatmulTiles with_carry(MatmulTiles tiles, bool carry) const {
    tiles.carry_a = carry && !layout_.a_transposed;
    tiles.carry_b = carry && layout_.b_transposed;
    tiles.carry_line_words = tiles.carry_a || tiles.carry_b ? line_words_ : 0;
    return tiles;
  }

  // A carry where chunks of k split lines (tiled_matmul.hpp, "Line carry"), and only for chunks of
  // at least half a line: a shorter chunk leaves the kernels' register blocks along k idle (chunks
  // of 1 with a carry ran small_cache 1.2x to 3.3x slower at n 1024, d 64, M 1024 to 12288), a
  // cost the lines do not show.
  MatmulTiles carried(const MatmulTiles& tiles) const {
    return with_carry(tiles, line_words_ > 1 && tiles.tile_k < k_ && tiles.tile_k % line_words_ != 0 &&
                                 2 * tiles.tile_k >= line_words_);
  }

  // Each candidate without a carry and, where one applies, with it.
  void evaluate(const MatmulTiles& tiles) {
    consider_one(with_carry(tiles, false));
    const MatmulTiles carrying = carried(tiles);
    if (carrying.carry_line_words > 0) consider_one(carrying);
  }

  // The chunk takes the memory the tile, the hooks and `reserve` words leave, up to all of k (at
  // least the chunk given).
  MatmulTiles fill_chunk(MatmulTiles tiles, int64_t reserve = 0) const {
    const int64_t avail = cache_words_ - row_words_ * tiles.tile_m - reserve;
    tiles.tile_k =
        std::min(max_k_, std::max(tiles.tile_k, (avail - tiles.tile_m * tiles.tile_n) / (tiles.tile_m + tiles.tile_n)));
    return tiles;
  }

  // The words a carry of these tiles would take from cache_words: a line per row of op(A) and per
  // column of op(B) where they are stored along k, less the carry_room beside cache_words.
  int64_t carry_reserve(const MatmulTiles& tiles) const {
    if (line_words_ == 1) return 0;
    return std::max<int64_t>(tiled_matmul_carry_words(with_carry(tiles, true)) - carry_room_, 0);
  }

  // A side rounded down to whole lines, where it is at least a line and not the whole matrix.
  int64_t whole_lines(int64_t side, int64_t whole) const {
    return side >= line_words_ && side < whole ? side / line_words_ * line_words_ : side;
  }

  void consider(const MatmulTiles& tiles) {
    // The same numbers of row and column blocks with tiles split evenly: the same word reads
    // (they depend only on those counts and on retention, which a longer chunk keeps), and the
    // memory freed goes to the chunk.
    MatmulTiles even = tiles;
    even.tile_m = ceil_div(max_m_, ceil_div(max_m_, tiles.tile_m));
    even.tile_n = ceil_div(max_n_, ceil_div(max_n_, tiles.tile_n));
    evaluate(fill_chunk(even));
    if (carry_reserve(even) > 0) {
      // The chunk that leaves room for a carry (from a chunk of 1: the carry may need a shorter
      // one than the tiles came with).
      MatmulTiles shorter = even;
      shorter.tile_k = 1;
      evaluate(fill_chunk(shorter, carry_reserve(even)));
    }
    if (line_words_ == 1) return;
    // Lines also depend on where the tiles start: the tile as it is, with its chunk in whole
    // lines too.
    evaluate(tiles);
    MatmulTiles lined = tiles;
    lined.tile_k = whole_lines(tiles.tile_k, max_k_);
    evaluate(lined);
  }

  // In lines, the widest tile of a height that leaves room for a line carry at the shortest chunk
  // that takes one (half a line), its chunk then grown into what is left. The widest tile of a
  // height may leave no room for a carry: below the tall cache (M < 4 L^2) its chunks are then a
  // fraction of a line and move every line once per chunk (n 512, d 64, M 512: the backward's P
  // at 9x16x4 moved 745,472 lines, at 3x16x8 with a carry 432,128), and at M = 2048 it moved 4 %
  // more lines than 18x32x8 with a carry. Only tiles at least a line wide: narrower ones leave
  // the kernels' vectors part empty (9x8x8 with a carry, the fewest lines at M 512, ran the
  // backward 3.4x slower), so below the tall cache the choice is not the fewest lines of all.
  void try_carry_width(int64_t tile_m) {
    const int64_t chunk = (line_words_ + 1) / 2;
    if (line_words_ == 1 || chunk >= max_k_) return;
    const MatmulTiles probe = with_carry({tile_m, 1, chunk}, true);
    if (!probe.carry_a && !probe.carry_b) return;
    const int64_t a_line = probe.carry_a ? line_words_ : 0;
    const int64_t b_line = probe.carry_b ? line_words_ : 0;
    const int64_t fixed = tile_m * (chunk + row_words_);
    // The tiles in cache_words; the tiles and the carry in cache_words + carry_room.
    const int64_t tiles_width = (cache_words_ - fixed) / (tile_m + chunk);
    const int64_t carry_width = (cache_words_ + carry_room_ - fixed - tile_m * a_line) / (tile_m + chunk + b_line);
    const int64_t width = std::min({tiles_width, carry_width, max_n_});
    if (width < std::min(line_words_, max_n_)) return;
    const int64_t even = ceil_div(max_n_, ceil_div(max_n_, width));
    const int64_t lined = whole_lines(width, max_n_);
    try_carry_tile(tile_m, even, chunk);
    if (lined != even) try_carry_tile(tile_m, lined, chunk);
  }

  // A tile_m x tile_n tile from a chunk of `chunk`, grown into what the tile and its carry leave;
  // the grown chunk as it is and in whole lines (each once where the two agree).
  void try_carry_tile(int64_t tile_m, int64_t tile_n, int64_t chunk) {
    const MatmulTiles tiles{tile_m, tile_n, chunk};
    MatmulTiles filled = fill_chunk(tiles, carry_reserve(tiles));
    evaluate(filled);
    const int64_t lined_chunk = std::max(chunk, whole_lines(filled.tile_k, max_k_));
    if (lined_chunk == filled.tile_k) return;
    filled.tile_k = lined_chunk;
    evaluate(filled);
  }

  // For each tile height, the widest tile that fits is the best of that height in words (reads
  // never grow with tile_n); in lines, that width rounded down to whole lines too. Two chunk
  // policies: the shortest chunk (widest tile; the chunk then takes what is left), and the whole
  // of k (the A panel stays resident across the row block). Returns false when no tile of this
  // height fits (a taller one fits even less).
  bool try_height(int64_t tile_m) {
    try_carry_width(tile_m);
    const int64_t avail = cache_words_ - row_words_ * tile_m;
    // tile_m * tile_n + tile_m * 1 + 1 * tile_n <= avail
    int64_t tile_n = (avail - tile_m) / (tile_m + 1);
    if (tile_n < 1) return false;
    tile_n = std::min(tile_n, max_n_);
    // tile_m * tile_n + tile_m * k + k * tile_n <= avail
    const int64_t panel_n = (avail - tile_m * max_k_) / (tile_m + max_k_);
    for (const int64_t width : {tile_n, whole_lines(tile_n, max_n_)}) {
      consider(fill_chunk({tile_m, width, 1}));
      if (panel_n >= 1) {
        const int64_t panel_width = std::min(panel_n, max_n_);
        consider({tile_m, width == tile_n ? panel_width : whole_lines(panel_width, max_n_), max_k_});
      }
      if (line_words_ == 1) break;
    }
    return true;
  }

  const int64_t a_, k_, b_, cache_words_, row_words_;
  const MatmulLayout layout_;
  const int64_t line_words_, carry_room_;
  // Tiles larger than the matrix buy nothing; each at least 1 so that empty sizes still work.
  const int64_t max_m_, max_n_, max_k_;
  MatmulTiles best_;
  int64_t best_lines_ = -1;
  int64_t best_reads_ = -1;
};

}  // namespace

MatmulTiles choose_matmul_tiles(int64_t a, int64_t k, int64_t b, int64_t cache_words, int64_t row_words,
                                MatmulLayout layout, int64_t line_words, int64_t carry_room) {
  io::check_line_words("choose_matmul_tiles", line_words);
  if (a < 0 || k < 0 || b < 0 || row_words < 0 || carry_room < 0) {
    fail("choose_matmul_tiles: sizes must be non-negative, got a ", a, ", k ", k, ", b ", b, ", row_words ", row_words,
         ", carry_room ", carry_room);
  }
  const int64_t minimum = tiled_matmul_min_cache_words(row_words);
  if (cache_words < minimum) {
    fail("choose_matmul_tiles: fast memory M = ", cache_words, " words is below the minimum ", minimum,
         " (a 1 x 1 output tile, one word of A and of B, ", row_words, " row words for the hooks)");
  }
  return MatmulTileSearch(a, k, b, cache_words, row_words, layout, line_words, carry_room).run();
}

}  // namespace spattn::schedules
