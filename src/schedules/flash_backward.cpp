// The flash backward (flash.hpp, docs/flash.md): deterministic, no atomics, three loop nests.
//   D pre-pass   per query tile: D_i = rowsum(dO_i ∘ O_i), written to slow memory
//   dK/dV pass   per key tile j: stream the query tiles, accumulate dK_j, dV_j, write them once
//   dQ pass      per query tile i: stream the key tiles, accumulate dQ_i, write it once
// Each nest owns its buffers (allocated once, before its loops, freed when it ends), so the peak
// resident words are the largest nest's. Both gradient passes recompute P from LSE. With a
// FlashMask the two gradient passes visit only the mask's stored tiles (dK/dV: the key tile's
// column list; dQ: the query tile's row list); masked scores are -inf, so their P and dS are 0.
#include "schedules/flash.hpp"
#include "schedules/flash_mask.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace spattn::schedules {

using io::Operand;
using namespace flash_detail;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void validate(const HeadBackward& p, const FlashTiles& tiles) {
  const char* what = "flash backward";
  const HeadShape s = head_shape(p);
  check_tiles(tiles, Pass::backward, what);
  check_view(what, "k", p.k, s.seqlen_k, s.head_dim, "seqlen_k x head_dim of q");
  check_view(what, "v", p.v, s.seqlen_k, s.head_dim_v, "seqlen_k of k x head_dim_v");
  check_view(what, "o", p.o, s.seqlen_q, s.head_dim_v, "seqlen_q x head_dim_v");
  check_view(what, "lse", p.lse, s.seqlen_q, 1, "seqlen_q x 1");
  check_view(what, "d_o", p.d_o, s.seqlen_q, s.head_dim_v, "seqlen_q x head_dim_v");
  check_view(what, "delta", p.delta, s.seqlen_q, 1, "seqlen_q x 1");
  check_view(what, "dq", p.dq, s.seqlen_q, s.head_dim, "seqlen_q x head_dim");
  check_view(what, "dk", p.dk, s.seqlen_k, s.head_dim, "seqlen_k x head_dim");
  check_view(what, "dv", p.dv, s.seqlen_k, s.head_dim_v, "seqlen_k x head_dim_v");
  if (!std::isfinite(p.scale)) fail(what, ": scale = ", p.scale, " must be finite");
}

// The forward's "P = exp(S - m'), normalized by l" as one step: P = exp(S - LSE), in place on
// s (rows_q, rows_k). A row with LSE = -inf attended nothing: P = 0.
void probabilities(float* s, const float* lse, int64_t rows_q, int64_t rows_k) {
  for (int64_t r = 0; r < rows_q; ++r) {
    float* p_row = s + r * rows_k;
    const float l = lse[r];
    if (l == kNegInf) {
      std::fill(p_row, p_row + rows_k, 0.0f);
      continue;
    }
    for (int64_t c = 0; c < rows_k; ++c) p_row[c] = std::exp(p_row[c] - l);
  }
}

// dP = dO V^T and dS = P ∘ (dP - D), in place on p (rows_q, rows_k); d_o (rows_q, e),
// v (rows_k, e), delta (rows_q).
void score_gradients(float* p, const float* d_o, const float* v, const float* delta,
                     int64_t rows_q, int64_t rows_k, int64_t head_dim_v) {
  for (int64_t r = 0; r < rows_q; ++r) {
    float* p_row = p + r * rows_k;
    const float* do_row = d_o + r * head_dim_v;
    for (int64_t c = 0; c < rows_k; ++c) {
      const float* v_row = v + c * head_dim_v;
      float dp = 0.0f;
      for (int64_t x = 0; x < head_dim_v; ++x) dp += do_row[x] * v_row[x];
      p_row[c] *= dp - delta[r];
    }
  }
}

// out (rows_k, cols) += a^T b for a (rows_q, rows_k), b (rows_q, cols): dV += P^T dO, dK += dS^T Q.
void add_transposed_product(const float* a, const float* b, int64_t rows_q, int64_t rows_k,
                            int64_t cols, float* out) {
  for (int64_t r = 0; r < rows_q; ++r) {
    const float* a_row = a + r * rows_k;
    const float* b_row = b + r * cols;
    for (int64_t c = 0; c < rows_k; ++c) {
      const float weight = a_row[c];
      float* out_row = out + c * cols;
      for (int64_t x = 0; x < cols; ++x) out_row[x] += weight * b_row[x];
    }
  }
}

// out (rows_q, cols) += a b for a (rows_q, rows_k), b (rows_k, cols): dQ += dS K.
void add_product(const float* a, const float* b, int64_t rows_q, int64_t rows_k, int64_t cols,
                 float* out) {
  for (int64_t r = 0; r < rows_q; ++r) {
    const float* a_row = a + r * rows_k;
    float* out_row = out + r * cols;
    for (int64_t c = 0; c < rows_k; ++c) {
      const float weight = a_row[c];
      const float* b_row = b + c * cols;
      for (int64_t x = 0; x < cols; ++x) out_row[x] += weight * b_row[x];
    }
  }
}

void scale_in_place(float* values, int64_t count, float scale) {
  for (int64_t i = 0; i < count; ++i) values[i] *= scale;
}

// D = rowsum(dO ∘ O), per query tile of block_q rows. Resident: block_q (2 e + 1).
void delta_pass(io::FastMemory& fast, const HeadBackward& p, const HeadShape& shape, int64_t bq) {
  const int64_t n_q = shape.seqlen_q, e = shape.head_dim_v;
  auto o_tile = fast.allocate<float>(bq * e, "O tile");    // (bq, e)
  auto do_tile = fast.allocate<float>(bq * e, "dO tile");  // (bq, e)
  auto delta = fast.allocate<float>(bq, "D");              // (bq)
  // Only the gradient passes' inner work reads D, and it runs only when there are keys.
  const int64_t num_q_tiles = shape.seqlen_k > 0 ? num_tiles(n_q, bq) : 0;
  for (int64_t qt = 0; qt < num_q_tiles; ++qt) {
    const int64_t q0 = qt * bq;
    const int64_t rows_q = tile_rows(n_q, bq, qt);
    fast.load(Operand::o, p.o, q0, 0, rows_q, e, o_tile, 0, e);
    fast.load(Operand::d_o, p.d_o, q0, 0, rows_q, e, do_tile, 0, e);
    for (int64_t r = 0; r < rows_q; ++r) {
      const float* o_row = o_tile.data() + r * e;
      const float* do_row = do_tile.data() + r * e;
      float sum = 0.0f;
      for (int64_t x = 0; x < e; ++x) sum += do_row[x] * o_row[x];
      delta[r] = sum;
    }
    fast.store(Operand::delta, delta, 0, 1, p.delta, q0, 0, rows_q, 1);
  }
}

// dK_j, dV_j per key tile of ck rows, streaming the query tiles of cq rows it visits.
// Resident: ck (2 d + 2 e) + cq (d + e + 2) + cq ck (+ flash_mask_resident_words(ck, cq)).
void dkdv_pass(io::FastMemory& fast, const HeadBackward& p, const HeadShape& shape, int64_t ck,
               int64_t cq, const FlashMask* mask) {
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  auto k_tile = fast.allocate<float>(ck * d, "K tile");          // (ck, d)
  auto v_tile = fast.allocate<float>(ck * e, "V tile");          // (ck, e)
  auto dk_acc = fast.allocate<float>(ck * d, "dK accumulator");  // (ck, d)
  auto dv_acc = fast.allocate<float>(ck * e, "dV accumulator");  // (ck, e)
  auto q_tile = fast.allocate<float>(cq * d, "Q tile");          // (cq, d)
  auto do_tile = fast.allocate<float>(cq * e, "dO tile");        // (cq, e)
  auto lse = fast.allocate<float>(cq, "LSE");                    // (cq)
  auto delta = fast.allocate<float>(cq, "D");                    // (cq)
  auto p_tile = fast.allocate<float>(cq * ck, "P/dS tile");      // (cq, ck), packed

  TileWalker queries = query_tiles_of(fast, mask, num_tiles(n_q, cq));
  for (int64_t kt = 0; kt < num_tiles(n_k, ck); ++kt) {
    const int64_t k0 = kt * ck;
    const int64_t rows_k = tile_rows(n_k, ck, kt);
    std::fill(dk_acc.data(), dk_acc.data() + rows_k * d, 0.0f);
    std::fill(dv_acc.data(), dv_acc.data() + rows_k * e, 0.0f);
    const int64_t num_queries = queries.start(kt);
    if (num_queries > 0) {
      fast.load(Operand::k, p.k, k0, 0, rows_k, d, k_tile, 0, d);
      fast.load(Operand::v, p.v, k0, 0, rows_k, e, v_tile, 0, e);
    }
    for (int64_t position = 0; position < num_queries; ++position) {
      const VisitedTile query = queries.next();
      const int64_t q0 = query.tile * cq;
      const int64_t rows_q = tile_rows(n_q, cq, query.tile);
      fast.load(Operand::q, p.q, q0, 0, rows_q, d, q_tile, 0, d);
      fast.load(Operand::d_o, p.d_o, q0, 0, rows_q, e, do_tile, 0, e);
      fast.load(Operand::lse, p.lse, q0, 0, rows_q, 1, lse, 0, 1);
      fast.load(Operand::delta, p.delta, q0, 0, rows_q, 1, delta, 0, 1);
      // forward: S = scale Q K^T, P = softmax(S). The transposed tile's bit (key c, query r) is
      // bit c * cq + r (flash_mask.hpp).
      score_tile(q_tile.data(), k_tile.data(), rows_q, rows_k, d, p.scale, p_tile.data(),
                 query.bits, 1, cq);
      probabilities(p_tile.data(), lse.data(), rows_q, rows_k);
      // forward: O = P V  ->  dV = P^T dO, dP = dO V^T; softmax: dS = P ∘ (dP - D)
      add_transposed_product(p_tile.data(), do_tile.data(), rows_q, rows_k, e, dv_acc.data());
      score_gradients(p_tile.data(), do_tile.data(), v_tile.data(), delta.data(), rows_q, rows_k, e);
      // forward: S = scale Q K^T  ->  dK = scale dS^T Q (scale applied once, below)
      add_transposed_product(p_tile.data(), q_tile.data(), rows_q, rows_k, d, dk_acc.data());
    }
    scale_in_place(dk_acc.data(), rows_k * d, p.scale);
    fast.store(Operand::dk, dk_acc, 0, d, p.dk, k0, 0, rows_k, d);
    fast.store(Operand::dv, dv_acc, 0, e, p.dv, k0, 0, rows_k, e);
  }
}

// dQ_i per query tile of bq rows, streaming the key tiles of bk rows it visits.
// Resident: bq (2 d + e + 2) + bk (d + e) + bq bk (+ flash_mask_resident_words(bq, bk)).
void dq_pass(io::FastMemory& fast, const HeadBackward& p, const HeadShape& shape, int64_t bq,
             int64_t bk, const FlashMask* mask) {
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  auto q_tile = fast.allocate<float>(bq * d, "Q tile");          // (bq, d)
  auto do_tile = fast.allocate<float>(bq * e, "dO tile");        // (bq, e)
  auto lse = fast.allocate<float>(bq, "LSE");                    // (bq)
  auto delta = fast.allocate<float>(bq, "D");                    // (bq)
  auto dq_acc = fast.allocate<float>(bq * d, "dQ accumulator");  // (bq, d)
  auto k_tile = fast.allocate<float>(bk * d, "K tile");          // (bk, d)
  auto v_tile = fast.allocate<float>(bk * e, "V tile");          // (bk, e)
  auto p_tile = fast.allocate<float>(bq * bk, "P/dS tile");      // (bq, bk), packed

  TileWalker keys = key_tiles_of(fast, mask, num_tiles(n_k, bk));
  for (int64_t qt = 0; qt < num_tiles(n_q, bq); ++qt) {
    const int64_t q0 = qt * bq;
    const int64_t rows_q = tile_rows(n_q, bq, qt);
    std::fill(dq_acc.data(), dq_acc.data() + rows_q * d, 0.0f);
    const int64_t num_keys = keys.start(qt);
    if (num_keys > 0) {
      fast.load(Operand::q, p.q, q0, 0, rows_q, d, q_tile, 0, d);
      fast.load(Operand::d_o, p.d_o, q0, 0, rows_q, e, do_tile, 0, e);
      fast.load(Operand::lse, p.lse, q0, 0, rows_q, 1, lse, 0, 1);
      fast.load(Operand::delta, p.delta, q0, 0, rows_q, 1, delta, 0, 1);
    }
    for (int64_t position = 0; position < num_keys; ++position) {
      const VisitedTile key = keys.next();
      const int64_t k0 = key.tile * bk;
      const int64_t rows_k = tile_rows(n_k, bk, key.tile);
      fast.load(Operand::k, p.k, k0, 0, rows_k, d, k_tile, 0, d);
      fast.load(Operand::v, p.v, k0, 0, rows_k, e, v_tile, 0, e);
      score_tile(q_tile.data(), k_tile.data(), rows_q, rows_k, d, p.scale, p_tile.data(), key.bits,
                 bk, 1);
      probabilities(p_tile.data(), lse.data(), rows_q, rows_k);
      score_gradients(p_tile.data(), do_tile.data(), v_tile.data(), delta.data(), rows_q, rows_k, e);
      // forward: S = scale Q K^T  ->  dQ = scale dS K (scale applied once, below)
      add_product(p_tile.data(), k_tile.data(), rows_q, rows_k, d, dq_acc.data());
    }
    scale_in_place(dq_acc.data(), rows_q * d, p.scale);
    fast.store(Operand::dq, dq_acc, 0, d, p.dq, q0, 0, rows_q, d);
  }
}

}  // namespace

void flash_backward(io::FastMemory& fast, const HeadBackward& problem, const FlashTiles& tiles,
                    const FlashMask* mask) {
  validate(problem, tiles);
  const HeadShape shape = head_shape(problem);
  check_mask("flash backward", mask, shape, tiles, Pass::backward);
  delta_pass(fast, problem, shape, tiles.block_q);
  dkdv_pass(fast, problem, shape, tiles.dkdv_block_k, tiles.dkdv_block_q, mask);
  dq_pass(fast, problem, shape, tiles.block_q, tiles.block_k, mask);
}

}  // namespace spattn::schedules
