// The flash forward (flash.hpp, docs/flash.md, docs/block_sparse.md): per query tile, stream the
// key tiles it visits (all, or the mask's list) through an online softmax, then write O and LSE
// once. Masked scores are -inf, so a row's softmax covers exactly its attended keys.
#include "schedules/flash.hpp"
#include "schedules/flash_mask.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spattn::schedules {

using io::Operand;
using namespace flash_detail;

namespace flash_detail {

void score_tile(const float* q, const float* k, int64_t rows_q, int64_t rows_k, int64_t head_dim,
                float scale, float* s, const uint64_t* bits, int64_t bit_row_stride,
                int64_t bit_col_stride) {
  for (int64_t r = 0; r < rows_q; ++r) {
    const float* q_row = q + r * head_dim;
    float* s_row = s + r * rows_k;
    for (int64_t c = 0; c < rows_k; ++c) {
      if (bits != nullptr) {
        const int64_t bit = r * bit_row_stride + c * bit_col_stride;
        if (((bits[bit / 64] >> (bit % 64)) & 1u) == 0) {
          s_row[c] = -std::numeric_limits<float>::infinity();  // masked: excluded exactly
          continue;
        }
      }
      const float* k_row = k + c * head_dim;
      float dot = 0.0f;
      for (int64_t x = 0; x < head_dim; ++x) dot += q_row[x] * k_row[x];
      s_row[c] = scale * dot;
    }
  }
}

}  // namespace flash_detail

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void validate(const HeadForward& p, const FlashTiles& tiles) {
  const char* what = "flash forward";
  const HeadShape s = head_shape(p);
  check_tiles(tiles, Pass::forward, what);
  check_view(what, "k", p.k, s.seqlen_k, s.head_dim, "seqlen_k x head_dim of q");
  check_view(what, "v", p.v, s.seqlen_k, s.head_dim_v, "seqlen_k of k x head_dim_v");
  check_view(what, "o", p.o, s.seqlen_q, s.head_dim_v, "seqlen_q x head_dim_v");
  check_view(what, "lse", p.lse, s.seqlen_q, 1, "seqlen_q x 1");
  if (!std::isfinite(p.scale)) fail(what, ": scale = ", p.scale, " must be finite");
}

// Folds one score tile into the running state of its rows (FlashAttention's online softmax):
//   m' = max(m, rowmax S),  P = exp(S - m'),  l' = l exp(m - m') + rowsum P,
//   acc' = acc exp(m - m') + P V.
// s (rows_q, rows_k) is overwritten by P; v (rows_k, head_dim_v); acc (rows_q, head_dim_v).
void online_softmax_update(float* s, const float* v, int64_t rows_q, int64_t rows_k,
                           int64_t head_dim_v, float* row_max, float* row_sum, float* acc) {
  for (int64_t r = 0; r < rows_q; ++r) {
    float* p_row = s + r * rows_k;
    float tile_max = kNegInf;
    for (int64_t c = 0; c < rows_k; ++c) tile_max = std::max(tile_max, p_row[c]);
    const float m_new = std::max(row_max[r], tile_max);
    if (m_new == kNegInf) continue;  // every score so far is -inf (a masked row): nothing to add
    const float alpha = std::exp(row_max[r] - m_new);  // 0 on the first tile (m = -inf)
    float tile_sum = 0.0f;
    for (int64_t c = 0; c < rows_k; ++c) {
      p_row[c] = std::exp(p_row[c] - m_new);
      tile_sum += p_row[c];
    }
    row_max[r] = m_new;
    row_sum[r] = row_sum[r] * alpha + tile_sum;
    float* acc_row = acc + r * head_dim_v;
    if (alpha != 1.0f) {
      for (int64_t x = 0; x < head_dim_v; ++x) acc_row[x] *= alpha;
    }
    for (int64_t c = 0; c < rows_k; ++c) {
      const float p = p_row[c];
      const float* v_row = v + c * head_dim_v;
      for (int64_t x = 0; x < head_dim_v; ++x) acc_row[x] += p * v_row[x];
    }
  }
}

// O = acc / l in place, and row_max becomes LSE = m + log l; a row that attended nothing (l = 0)
// gets O = 0 and LSE = -inf.
void finalize_rows(int64_t rows_q, int64_t head_dim_v, float* row_max, const float* row_sum,
                   float* acc) {
  for (int64_t r = 0; r < rows_q; ++r) {
    float* acc_row = acc + r * head_dim_v;
    if (row_sum[r] > 0.0f) {
      const float inv = 1.0f / row_sum[r];
      for (int64_t x = 0; x < head_dim_v; ++x) acc_row[x] *= inv;
      row_max[r] += std::log(row_sum[r]);
    } else {
      std::fill(acc_row, acc_row + head_dim_v, 0.0f);
      row_max[r] = kNegInf;
    }
  }
}

}  // namespace

void flash_forward(io::FastMemory& fast, const HeadForward& problem, const FlashTiles& tiles,
                   const FlashMask* mask) {
  validate(problem, tiles);
  const HeadShape shape = head_shape(problem);
  check_mask("flash forward", mask, shape, tiles, Pass::forward);
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const int64_t bq = tiles.block_q, bk = tiles.block_k;

  // Resident: bq (d + e + 2) + bk (d + e) + bq bk words (flash_resident_words), plus the mask's
  // flash_mask_resident_words(bq, bk) index words when masked (held by `keys`).
  auto q_tile = fast.allocate<float>(bq * d, "Q tile");      // (bq, d)
  auto acc = fast.allocate<float>(bq * e, "O accumulator");  // (bq, e)
  auto row_max = fast.allocate<float>(bq, "row max");        // (bq), becomes LSE
  auto row_sum = fast.allocate<float>(bq, "row sum");        // (bq)
  auto k_tile = fast.allocate<float>(bk * d, "K tile");      // (bk, d)
  auto v_tile = fast.allocate<float>(bk * e, "V tile");      // (bk, e)
  auto s_tile = fast.allocate<float>(bq * bk, "S/P tile");   // (bq, bk), packed (rows_q, rows_k)

  const int64_t num_q_tiles = num_tiles(n_q, bq);
  TileWalker keys = key_tiles_of(fast, mask, num_tiles(n_k, bk));
  for (int64_t qt = 0; qt < num_q_tiles; ++qt) {
    const int64_t q0 = qt * bq;
    const int64_t rows_q = tile_rows(n_q, bq, qt);
    std::fill(acc.data(), acc.data() + rows_q * e, 0.0f);
    std::fill(row_max.data(), row_max.data() + rows_q, kNegInf);
    std::fill(row_sum.data(), row_sum.data() + rows_q, 0.0f);

    const int64_t num_keys = keys.start(qt);
    if (num_keys > 0) fast.load(Operand::q, problem.q, q0, 0, rows_q, d, q_tile, 0, d);
    for (int64_t position = 0; position < num_keys; ++position) {
      const VisitedTile key = keys.next();
      const int64_t k0 = key.tile * bk;
      const int64_t rows_k = tile_rows(n_k, bk, key.tile);
      fast.load(Operand::k, problem.k, k0, 0, rows_k, d, k_tile, 0, d);
      fast.load(Operand::v, problem.v, k0, 0, rows_k, e, v_tile, 0, e);
      // A partial tile's bit (r, c) is bit r * bk + c (flash_mask.hpp).
      score_tile(q_tile.data(), k_tile.data(), rows_q, rows_k, d, problem.scale, s_tile.data(),
                 key.bits, bk, 1);
      online_softmax_update(s_tile.data(), v_tile.data(), rows_q, rows_k, e, row_max.data(),
                            row_sum.data(), acc.data());
    }
    finalize_rows(rows_q, e, row_max.data(), row_sum.data(), acc.data());
    fast.store(Operand::o, acc, 0, e, problem.o, q0, 0, rows_q, e);
    fast.store(Operand::lse, row_max, 0, 1, problem.lse, q0, 0, rows_q, 1);
  }
}

}  // namespace spattn::schedules
