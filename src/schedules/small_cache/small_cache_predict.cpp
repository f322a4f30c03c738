// The small-cache schedule's tile choice (small_cache_tiles, which the planner calls) and its exact
// I/O prediction.
// Derivations: docs/small_cache.md.
#include "schedules/small_cache/small_cache.hpp"

#include "schedules/common/dense_lines.hpp"

#include <cassert>

#include <spattn/error.hpp>

#include <algorithm>
#include <ostream>
#include <sstream>

namespace spattn::schedules {
namespace {

void check_shape(const char* where, const HeadShape& shape) {
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail(where, ": sizes must be non-negative, got seqlen_q ", shape.seqlen_q, ", seqlen_k ",
         shape.seqlen_k, ", head_dim ", shape.head_dim, ", head_dim_v ", shape.head_dim_v);
  }
}

}  // namespace

namespace small_cache_detail {

// The tiles were chosen for this pass and shape: the plan hands them out with the problem
// (plan/planned_run.hpp), so a mismatch is a bug in the caller, not bad input.
void check_tiles([[maybe_unused]] const char* where, [[maybe_unused]] const HeadShape& shape,
                 [[maybe_unused]] const SmallCacheTiles& tiles, [[maybe_unused]] Pass pass) {
  assert(tiles.pass == pass && "small_cache tiles chosen for the other pass");
  [[maybe_unused]] const HeadShape& t = tiles.shape;
  assert(t.seqlen_q == shape.seqlen_q && t.seqlen_k == shape.seqlen_k && t.head_dim == shape.head_dim &&
         t.head_dim_v == shape.head_dim_v && "small_cache tiles chosen for another shape");
}

void check_room(const char* where, const io::FastMemory& fast, const SmallCacheTiles& tiles) {
  const int64_t needed = small_cache_fast_words(tiles);
  const int64_t free_words = fast.capacity() - fast.resident();
  if (needed > free_words) {
    std::ostringstream message;
    message << where << ": the tiles need " << needed << " words of fast memory, " << free_words
            << " of M = " << fast.capacity() << " are free (tiles chosen for M = "
            << tiles.cache_words << ")";
    throw RuntimeError(message.str());
  }
}

}  // namespace small_cache_detail

using namespace small_cache_detail;

int64_t small_cache_min_cache_words(const HeadShape& shape, Pass pass) {
  check_shape("small_cache_min_cache_words", shape);
  // The D pass needs 3 words (one of dO, one of O, the sum), less than either product.
  return pass == Pass::forward ? tiled_matmul_min_cache_words(kForwardScoresRowWords)
                               : tiled_matmul_min_cache_words(kBackwardScoresRowWords);
}

int64_t small_cache_fast_words(const SmallCacheTiles& tiles) {
  const auto product = [](const MatmulTiles& t, int64_t row_words) {
    return tiled_matmul_fast_words(t) + row_words * t.tile_m;
  };
  if (tiles.pass == Pass::forward) {
    return std::max(product(tiles.scores, kForwardScoresRowWords),
                    product(tiles.output, kForwardOutputRowWords));
  }
  const int64_t delta_pass = tiles.delta_rows * (2 * tiles.delta_cols + 1);
  return std::max({delta_pass, product(tiles.scores, kBackwardScoresRowWords),
                   product(tiles.d_scores, kBackwardDScoresRowWords), product(tiles.dq, 0),
                   product(tiles.dk, 0), product(tiles.dv, 0)});
}

IoCount predict_small_cache_forward(const HeadShape& shape, const SmallCacheTiles& tiles) {
  check_tiles("predict_small_cache_forward", shape, tiles, Pass::forward);
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  IoCount count;
  // S = scale Q K^T: reads Q, K; writes S (m n). LSE written at each row block's end (m).
  count += predict_tiled_matmul(m, shape.head_dim, n, tiles.scores);
  count.writes += m;
  // O = exp(S - LSE) V: reads S, V and LSE once per row block (m); writes O.
  count += predict_tiled_matmul(m, n, shape.head_dim_v, tiles.output);
  count.reads += m;
  return count;
}

IoCount predict_small_cache_backward(const HeadShape& shape, const SmallCacheTiles& tiles) {
  check_tiles("predict_small_cache_backward", shape, tiles, Pass::backward);
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int64_t d = shape.head_dim;
  const int64_t dv = shape.head_dim_v;
  IoCount count;
  // D = rowsum(dO ∘ O): dO and O read once, D written.
  count.reads += 2 * m * dv;
  count.writes += m;
  // P = exp(scale Q K^T - LSE): reads Q, K and LSE (m); writes P.
  count += predict_tiled_matmul(m, d, n, tiles.scores);
  count.reads += m;
  // dS = P ∘ (dO V^T - D): reads dO, V, D (m) and each P tile once (m n); writes dS.
  count += predict_tiled_matmul(m, dv, n, tiles.d_scores);
  count.reads += m + m * n;
  // dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
  count += predict_tiled_matmul(m, n, d, tiles.dq);
  count += predict_tiled_matmul(n, m, d, tiles.dk);
  count += predict_tiled_matmul(n, m, dv, tiles.dv);
  return count;
}

IoCount predict_small_cache_forward_lines(const HeadShape& shape, const SmallCacheTiles& tiles,
                                          int64_t line_words) {
  check_tiles("predict_small_cache_forward_lines", shape, tiles, Pass::forward);
  io::check_line_words("predict_small_cache_forward_lines", line_words);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, L = line_words;
  IoCount count;
  // S = scale Q K^T, LSE written at each row block's end; O = exp(S - LSE) V, LSE read per row
  // block.
  count += predict_tiled_matmul_lines(m, shape.head_dim, n, tiles.scores, kScoresLayout, L);
  count.writes += io::chunked_lines(m, tiles.scores.tile_m, L);
  count += predict_tiled_matmul_lines(m, n, shape.head_dim_v, tiles.output, kRowMajor, L);
  count.reads += io::chunked_lines(m, tiles.output.tile_m, L);
  return count;
}

IoCount predict_small_cache_backward_lines(const HeadShape& shape, const SmallCacheTiles& tiles,
                                           int64_t line_words) {
  check_tiles("predict_small_cache_backward_lines", shape, tiles, Pass::backward);
  io::check_line_words("predict_small_cache_backward_lines", line_words);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, dv = shape.head_dim_v;
  const int64_t L = line_words;
  IoCount count;
  // D pass: dO and O in delta_rows x delta_cols chunks, D written per row chunk.
  count.reads += 2 * dense_grid_lines(m, dv, tiles.delta_rows, tiles.delta_cols, L);
  count.writes += io::chunked_lines(m, tiles.delta_rows, L);
  // P: Q, K, LSE per row block; P written.
  count += predict_tiled_matmul_lines(m, d, n, tiles.scores, kScoresLayout, L);
  count.reads += io::chunked_lines(m, tiles.scores.tile_m, L);
  // dS: dO, V, D per row block, and each P tile once, in runs of whole rows that fit the B chunk
  // buffer (as ScoreGradientHooks loads it); dS written.
  const MatmulTiles& ds = tiles.d_scores;
  count += predict_tiled_matmul_lines(m, dv, n, ds, kScoresLayout, L);
  count.reads += io::chunked_lines(m, ds.tile_m, L);
  if (n == 1 && m > 0) {
    // P is then a vector, so the runs matter: rows [row0 + r0, + run) of each row block.
    const int64_t run = std::max<int64_t>(1, ds.tile_k * ds.tile_n);
    for (int64_t row0 = 0; row0 < m; row0 += ds.tile_m) {
      const int64_t rows = std::min(ds.tile_m, m - row0);
      for (int64_t r0 = 0; r0 < rows; r0 += run) {
        count.reads += io::segment_lines(row0 + r0, std::min(run, rows - r0), L);
      }
    }
  } else {
    count.reads += dense_grid_lines(m, n, ds.tile_m, ds.tile_n, L);
  }
  // dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO.
  count += predict_tiled_matmul_lines(m, n, d, tiles.dq, kRowMajor, L);
  count += predict_tiled_matmul_lines(n, m, d, tiles.dk, kTransposedA, L);
  count += predict_tiled_matmul_lines(n, m, dv, tiles.dv, kTransposedA, L);
  return count;
}

int64_t small_cache_flops(const HeadShape& shape, int64_t pairs, Pass pass) {
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  return (pass == Pass::forward ? 2 * (d + e) : 6 * d + 4 * e) * pairs;
}

std::ostream& operator<<(std::ostream& out, const SmallCacheTiles& tiles) {
  out << "small_cache " << pass_name(tiles.pass) << " tiles for " << tiles.shape << ", M " << tiles.cache_words << ", L "
      << tiles.line_words << ": ";
  return print_tile_list(out, tiles);
}

std::ostream& print_tile_list(std::ostream& out, const SmallCacheTiles& tiles) {
  if (tiles.pass == Pass::forward) return out << "S " << tiles.scores << "; O " << tiles.output;
  return out << "P " << tiles.scores << "; dS " << tiles.d_scores << "; dQ " << tiles.dq << "; dK " << tiles.dk << "; dV "
             << tiles.dv << "; D " << tiles.delta_rows << " x " << tiles.delta_cols;
}

}  // namespace spattn::schedules
