// Resident words and the exact I/O prediction of the dense flash schedule
// (flash.hpp; derivations in docs/flash.md). Everything here is O(1) arithmetic on the shape and
// the tiles. The masked predictions are in flash_mask_predict.cpp.
#include "schedules/flash/flash.hpp"

#include "schedules/common/dense_lines.hpp"
#include "schedules/flash/flash_nests.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <ostream>
#include <limits>

namespace spattn::schedules {
namespace {

using namespace flash_detail;

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
void check_tiles(const FlashTiles& tiles, Pass pass, const char* what) {
  check_tile(what, "block_q", tiles.block_q);
  if (pass == Pass::forward && tiles.dq_in_dkdv) fail(what, ": dq_in_dkdv is a backward's tiling");
  if (!tiles.dq_in_dkdv) check_tile(what, "block_k", tiles.block_k);
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
  if (tiles.dq_in_dkdv) {
    return std::max(fused_dkdv_nest(shape, masking).resident(tiles.dkdv_block_k, tiles.dkdv_block_q),
                    tiles.block_q * delta_words_per_row(shape));
  }
  return std::max(dkdv_nest(shape, masking).resident(tiles.dkdv_block_k, tiles.dkdv_block_q),
                  dq_nest(shape, masking).resident(tiles.block_q, tiles.block_k));
}

int64_t flash_min_cache_words(const HeadShape& shape, Pass pass, FlashMasking masking, bool dq_in_dkdv) {
  check_shape(shape, "flash_min_cache_words");
  return flash_resident_words(shape, FlashTiles{1, dq_in_dkdv ? 0 : 1, 1, 1, dq_in_dkdv && pass == Pass::backward},
                              pass, masking);
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
  if (tiles.dq_in_dkdv) {
    // dQ_i read and written back at every visit but its first (which starts from 0).
    const int64_t visits = num_tiles(n_k, tiles.dkdv_block_k);
    return delta_pass + dkdv_pass + IoCount{(visits - 1) * n_q * d, visits * n_q * d};
  }
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
  // dQ is written in the dQ pass's query tiles, or (dq_in_dkdv) in the dK/dV pass's.
  const int64_t dq_lines = dense_grid_lines(n_q, d, tiles.dq_in_dkdv ? cq : bq, d, L);
  const int64_t gradients = dense_grid_lines(n_k, d, ck, d, L) + dense_grid_lines(n_k, e, ck, e, L) + dq_lines;
  if (n_q == 0 || n_k == 0) return {0, gradients};  // zero gradients; D is neither needed nor written
  IoCount count;
  count.writes = gradients + io::chunked_lines(n_q, bq, L);  // + D
  // D pre-pass: O, dO per query tile of bq rows.
  count.reads = 2 * dense_grid_lines(n_q, e, bq, e, L);
  // dK/dV pass: K, V per key tile; Q, dO, LSE and D per query tile it visits.
  count.reads += dense_grid_lines(n_k, d, ck, d, L) + dense_grid_lines(n_k, e, ck, e, L) +
                 num_tiles(n_k, ck) * (dense_grid_lines(n_q, d, cq, d, L) + dense_grid_lines(n_q, e, cq, e, L) +
                                       2 * io::chunked_lines(n_q, cq, L));
  if (tiles.dq_in_dkdv) {  // dQ_i read back at every visit but its first, written at every visit
    count.reads += (num_tiles(n_k, ck) - 1) * dq_lines;
    count.writes += (num_tiles(n_k, ck) - 1) * dq_lines;
    return count;
  }
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
  out << "block_q " << tiles.block_q;
  if (!tiles.dq_in_dkdv) out << ", block_k " << tiles.block_k;
  if (tiles.dkdv_block_q != 0 || tiles.dkdv_block_k != 0) {
    out << ", dkdv_block_q " << tiles.dkdv_block_q << ", dkdv_block_k " << tiles.dkdv_block_k;
  }
  if (tiles.dq_in_dkdv) out << ", dQ in the dK/dV pass";
  return out;
}

}  // namespace spattn::schedules
