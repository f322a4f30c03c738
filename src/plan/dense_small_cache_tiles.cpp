// The dense small_cache tiles (dense_small_cache_tiles.hpp): each product's tiles from
// choose_matmul_tiles in the fast memory the schedule leaves them, and the D pass's chunk.
#include "plan/dense_small_cache_tiles.hpp"

#include "plan/matmul_tile_search.hpp"

#include <spattn/error.hpp>

#include <algorithm>

namespace spattn::schedules {

using namespace small_cache_detail;

SmallCacheTiles small_cache_tiles(const HeadShape& shape, int64_t cache_words, Pass pass,
                                  int64_t line_words) {
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail("small_cache_tiles: sizes must be non-negative, got seqlen_q ", shape.seqlen_q, ", seqlen_k ",
         shape.seqlen_k, ", head_dim ", shape.head_dim, ", head_dim_v ", shape.head_dim_v);
  }
  io::check_line_words("small_cache_tiles", line_words);
  const int64_t minimum = small_cache_min_cache_words(shape, pass);
  if (cache_words < minimum) {
    fail("small_cache_tiles: fast memory M = ", cache_words, " words is below the minimum of ",
         minimum, " words for the small-cache ", pass_name(pass),
         " (1 x 1 output tiles, one word each of A and B, ",
         pass == Pass::forward ? "the row max and row sum)" : "one row statistic)");
  }
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int64_t d = shape.head_dim;
  const int64_t dv = shape.head_dim_v;
  SmallCacheTiles tiles;
  tiles.pass = pass;
  tiles.shape = shape;
  tiles.cache_words = cache_words;
  tiles.line_words = line_words;
  const int64_t line = line_words;
  // The tiles get half of M when lines are counted: every tile is a copy, and a copy moves the
  // lines it reads through the cache beside the tile it fills, so a step holds about twice its
  // tiles' words (docs/io_model.md, "Headroom"). The other half holds those lines, and the lines
  // a chunk carries to the next (tiled_matmul.hpp, "Line carry") are counted there. With words
  // alone (L = 1) the model's M is the tiles'. Never below the schedule's minimum.
  const int64_t budget = line > 1 ? std::max(minimum, cache_words / 2) : cache_words;
  const int64_t room = cache_words - budget;
  if (pass == Pass::forward) {
    tiles.scores = choose_matmul_tiles(m, d, n, budget, kForwardScoresRowWords, kScoresLayout, line, room);
    tiles.output = choose_matmul_tiles(m, n, dv, budget, kForwardOutputRowWords, kRowMajor, line, room);
    return tiles;
  }
  tiles.scores = choose_matmul_tiles(m, d, n, budget, kBackwardScoresRowWords, kScoresLayout, line, room);
  tiles.d_scores = choose_matmul_tiles(m, dv, n, budget, kBackwardDScoresRowWords, kScoresLayout, line, room);
  tiles.dq = choose_matmul_tiles(m, n, d, budget, 0, kRowMajor, line, room);
  tiles.dk = choose_matmul_tiles(n, m, d, budget, 0, kTransposedA, line, room);
  tiles.dv = choose_matmul_tiles(n, m, dv, budget, 0, kTransposedA, line, room);
  // D pass: a rows x cols chunk of dO and of O and one sum per row, 2 rows cols + rows <= M.
  tiles.delta_cols = std::min(std::max<int64_t>(dv, 1), (budget - 1) / 2);
  tiles.delta_rows = std::min(std::max<int64_t>(m, 1), budget / (2 * tiles.delta_cols + 1));
  return tiles;
}

}  // namespace spattn::schedules
