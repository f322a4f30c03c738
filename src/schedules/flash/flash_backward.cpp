// The flash backward (flash.hpp, docs/flash.md): deterministic, no atomics, three loop nests.
//   D pre-pass   per query tile: D_i = rowsum(dO_i ∘ O_i), written to slow memory
//   dK/dV pass   per key tile j: stream the query tiles, accumulate dK_j, dV_j, write them once
//   dQ pass      per query tile i: stream the key tiles, accumulate dQ_i, write it once
// Each nest owns its buffers (allocated once, before its loops, freed when it ends), so the peak
// resident words are the largest nest's. Both gradient passes recompute P from LSE. With a
// FlashMask the two gradient passes visit only the mask's stored tiles (dK/dV: the key tile's
// column list; dQ: the query tile's row list); masked scores are -inf, so their P and dS are 0.
// The outer tiles of all heads are split over a team of workers (flash_heads.hpp), the D pre-pass
// first, then the two gradient passes; the arithmetic on the tiles is flash_kernels.hpp's.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_backward_fused.hpp"
#include "schedules/flash/flash_dq_partials.hpp"
#include "schedules/flash/flash_dq_turns.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "cpu/kernels/flash_kernels.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/flash/flash_pairs.hpp"
#include "schedules/flash/flash_split.hpp"

#include "cpu/workers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace spattn::schedules {

using io::Operand;
using namespace flash_detail;

namespace {

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

void scale_in_place(float* values, int64_t count, float scale) {
  for (int64_t i = 0; i < count; ++i) values[i] *= scale;
}

// K^T (d, rows_k) -> scale K (rows_k, d): the dQ product's K rows, from the tile the score products use.
void scaled_rows(const float* k_t, int64_t d, int64_t rows_k, float scale, float* k_rows) {
  for (int64_t x = 0; x < d; ++x) {
    for (int64_t r = 0; r < rows_k; ++r) k_rows[r * d + x] = k_t[x * rows_k + r] * scale;
  }
}

// D = rowsum(dO ∘ O) for the query tiles `worker` owns (per query tile of block_q rows).
// Resident: block_q (2 e + 1).
void delta_nest(io::FastMemory& fast, const std::vector<HeadBackward>& heads, const HeadShape& shape,
                int64_t bq, int worker, int workers) {
  const int64_t n_q = shape.seqlen_q, e = shape.head_dim_v;
  auto o_tile = fast.allocate<float>(bq * e, "O tile");    // (bq, e)
  auto do_tile = fast.allocate<float>(bq * e, "dO tile");  // (bq, e)
  auto delta = fast.allocate<float>(bq, "D");              // (bq)
  // Only the gradient passes' inner work reads D, and it runs only when there are keys.
  const int64_t num_q_tiles = shape.seqlen_k > 0 ? num_tiles(n_q, bq) : 0;
  const auto num_items = static_cast<int64_t>(heads.size()) * num_q_tiles;
  cpu::for_each_item(worker, workers, num_items, [&](int64_t item) {
    const HeadBackward& p = heads[static_cast<size_t>(item / num_q_tiles)];
    const int64_t qt = item % num_q_tiles;
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
  });
}

}  // namespace

namespace flash_detail {

void dkdv_nest(io::FastMemory& fast, const std::vector<HeadBackward>& heads, const HeadShape& shape, int64_t ck,
               int64_t cq, const FlashMask* mask, const std::vector<int64_t>& items, const DqInDkdv* dq) {
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  auto k_tile = fast.allocate<float>(ck * d, "K tile");          // (d, rows_k): K_j transposed
  auto v_tile = fast.allocate<float>(ck * e, "V tile");          // (e, rows_k): V_j transposed
  auto dk_acc = fast.allocate<float>(ck * d, "dK accumulator");  // (rows_k, d)
  auto dv_acc = fast.allocate<float>(ck * e, "dV accumulator");  // (rows_k, e)
  auto q_tile = fast.allocate<float>(cq * d, "Q tile");          // (rows_q, d)
  auto do_tile = fast.allocate<float>(cq * e, "dO tile");        // (rows_q, e)
  auto lse = fast.allocate<float>(cq, "LSE");                    // (cq)
  auto delta = fast.allocate<float>(cq, "D");                    // (cq)
  auto p_tile = fast.allocate<float>(cq * ck, "P/dS tile");      // (rows_q, rows_k), packed
  // dQ in the pass: K_j's rows scaled, dQ_i, dS transposed (fused_dkdv_nest's words).
  const int64_t fused = dq != nullptr ? 1 : 0;
  auto k_rows = fast.allocate<float>(fused * ck * d, "K rows");  // (rows_k, d): scale K_j
  auto dq_tile = fast.allocate<float>(fused * cq * d, "dQ tile");  // (rows_q, d)
  auto s_t = fast.allocate<float>(fused * cq * ck, "dS^T tile");   // (rows_k, rows_q)

  const int64_t num_k_tiles = num_tiles(n_k, ck), num_q_tiles = num_tiles(n_q, cq);
  TileWalker queries = query_tiles_of(fast, mask, num_q_tiles);
  for (size_t index = 0; index < items.size(); ++index) {
    const int64_t item = items[index];
    if (dq != nullptr && dq->turns != nullptr) dq->turns->start_item(dq->worker, index);
    const int64_t head = item / num_k_tiles;
    const HeadBackward& p = heads[static_cast<size_t>(head)];
    const int64_t kt = item % num_k_tiles;
    const int64_t k0 = kt * ck;
    const int64_t rows_k = tile_rows(n_k, ck, kt);
    std::fill(dk_acc.data(), dk_acc.data() + rows_k * d, 0.0f);
    std::fill(dv_acc.data(), dv_acc.data() + rows_k * e, 0.0f);
    bool k_packed = false, v_packed = false;
    if (queries.start(kt)) {
      fast.load(Operand::k, p.k.transposed(), 0, k0, d, rows_k, k_tile, 0, rows_k);
      fast.load(Operand::v, p.v.transposed(), 0, k0, e, rows_k, v_tile, 0, rows_k);
      if (dq != nullptr) scaled_rows(k_tile.data(), d, rows_k, p.scale, k_rows.data());  // (before any packing)
      k_packed = pack_bf16_pairs_where_taken(k_tile.data(), d, rows_k, p.k, p.q);
      v_packed = pack_bf16_pairs_where_taken(v_tile.data(), e, rows_k, p.v, p.d_o);
    }
    while (queries.more()) {
      const VisitedTile query = queries.next();
      const int64_t q0 = query.tile * cq;
      const int64_t rows_q = tile_rows(n_q, cq, query.tile);
      // (read in place where the rows already lie as the tiles would: io.hpp, read_tile)
      const float* q_rows = fast.read_tile(Operand::q, p.q, q0, 0, rows_q, d, q_tile, 0, d);
      const float* do_rows = fast.read_tile(Operand::d_o, p.d_o, q0, 0, rows_q, e, do_tile, 0, e);
      const float* lse_rows = fast.read_tile(Operand::lse, p.lse, q0, 0, rows_q, 1, lse, 0, 1);
      const float* delta_rows = fast.read_tile(Operand::delta, p.delta, q0, 0, rows_q, 1, delta, 0, 1);
      // forward: S = scale Q K^T, P = softmax(S), O = P V  ->  dV = P^T dO, dP = dO V^T,
      // dS = P ∘ (dP - D), dK = scale dS^T Q (scale applied once, below)
      flash_kernels::DkdvTile step;
      step.k_t = k_tile.data();
      step.v_t = v_tile.data();
      step.k_packed = k_packed;
      step.v_packed = v_packed;
      step.q = q_rows;
      step.d_o = do_rows;
      step.lse = lse_rows;
      step.delta = delta_rows;
      step.rows_k = rows_k;
      step.rows_q = rows_q;
      step.d = d;
      step.e = e;
      step.scale = p.scale;
      step.bits = query.bits;  // the transposed tile's bit (key c, query r) is bit c * cq + r
      step.bit_stride = cq;
      step.s = p_tile.data();
      step.dk = dk_acc.data();
      step.dv = dv_acc.data();
      step.keep_scores = dq != nullptr;
      flash_kernels::dkdv_tile(step);  // (keep_scores: leaves dS in p_tile)
      if (dq == nullptr) continue;
      // dQ_i += dS (scale K_j), after every earlier key tile's term.
      if (dq->turns != nullptr) dq->turns->wait_turn(dq->worker, item, query.tile);
      uint8_t& seen = (*dq->visited)[static_cast<size_t>(head * num_q_tiles + query.tile)];
      // (a 16-bit dq: the sums in float32 until the tile's last term, which stores dq itself)
      const bool last = dq->partials != nullptr && dq->partials->last_visit(head, query.tile);
      const io::SlowMatrix<float>& sums = dq->partials != nullptr ? dq->partials->sums(head) : p.dq;
      if (seen != 0) {
        fast.load(Operand::dq, sums, q0, 0, rows_q, d, dq_tile, 0, d);
      } else {
        std::fill(dq_tile.data(), dq_tile.data() + rows_q * d, 0.0f);
      }
      flash_kernels::DqFromScoresTile dq_step;
      dq_step.s = p_tile.data();
      dq_step.k = k_rows.data();
      dq_step.rows_q = rows_q;
      dq_step.rows_k = rows_k;
      dq_step.d = d;
      dq_step.bits = query.bits;
      dq_step.bit_stride = cq;
      dq_step.s_t = s_t.data();
      dq_step.dq = dq_tile.data();
      flash_kernels::dq_from_scores_tile(dq_step);
      fast.store(Operand::dq, dq_tile, 0, d, last ? p.dq : sums, q0, 0, rows_q, d);
      if (last) dq->partials->finished(head, query.tile);
      seen = 1;
      if (dq->turns != nullptr) dq->turns->finished_query_tile(dq->worker, index, query.tile);
    }
    scale_in_place(dk_acc.data(), rows_k * d, p.scale);
    fast.store(Operand::dk, dk_acc, 0, d, p.dk, k0, 0, rows_k, d);
    fast.store(Operand::dv, dv_acc, 0, e, p.dv, k0, 0, rows_k, e);
  }
  if (dq != nullptr && dq->turns != nullptr) dq->turns->finish(dq->worker);
}

}  // namespace flash_detail

namespace {

// dQ_i per query tile of bq rows, streaming the key tiles of bk rows it visits, for `items`
// (item = head * query tiles + query tile).
// Resident: bq (2 d + e + 2) + bk (d + e) + bq bk (+ flash_mask_resident_words(bq, bk)).
void dq_nest(io::FastMemory& fast, const std::vector<HeadBackward>& heads, const HeadShape& shape,
             int64_t bq, int64_t bk, const FlashMask* mask, const std::vector<int64_t>& items) {
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  auto q_tile = fast.allocate<float>(bq * d, "Q tile");          // (d, rows_q): Q_i transposed
  auto do_tile = fast.allocate<float>(bq * e, "dO tile");        // (e, rows_q): dO_i transposed
  auto lse = fast.allocate<float>(bq, "LSE");                    // (bq)
  auto delta = fast.allocate<float>(bq, "D");                    // (bq)
  auto dq_acc = fast.allocate<float>(bq * d, "dQ accumulator");  // (rows_q, d)
  auto k_tile = fast.allocate<float>(bk * d, "K tile");          // (rows_k, d)
  auto v_tile = fast.allocate<float>(bk * e, "V tile");          // (rows_k, e)
  auto p_tile = fast.allocate<float>(bq * bk, "P/dS tile");      // (rows_k, rows_q), packed

  const int64_t num_q_tiles = num_tiles(n_q, bq);
  TileWalker keys = key_tiles_of(fast, mask, num_tiles(n_k, bk));
  for (const int64_t item : items) {
    const HeadBackward& p = heads[static_cast<size_t>(item / num_q_tiles)];
    const int64_t qt = item % num_q_tiles;
    const int64_t q0 = qt * bq;
    const int64_t rows_q = tile_rows(n_q, bq, qt);
    std::fill(dq_acc.data(), dq_acc.data() + rows_q * d, 0.0f);
    bool q_packed = false, do_packed = false;
    if (keys.start(qt)) {
      fast.load(Operand::q, p.q.transposed(), 0, q0, d, rows_q, q_tile, 0, rows_q);
      fast.load(Operand::d_o, p.d_o.transposed(), 0, q0, e, rows_q, do_tile, 0, rows_q);
      fast.load(Operand::lse, p.lse, q0, 0, rows_q, 1, lse, 0, 1);
      fast.load(Operand::delta, p.delta, q0, 0, rows_q, 1, delta, 0, 1);
      q_packed = pack_bf16_pairs_where_taken(q_tile.data(), d, rows_q, p.q, p.k);
      do_packed = pack_bf16_pairs_where_taken(do_tile.data(), e, rows_q, p.d_o, p.v);
    }
    while (keys.more()) {
      const VisitedTile key = keys.next();
      const int64_t k0 = key.tile * bk;
      const int64_t rows_k = tile_rows(n_k, bk, key.tile);
      const float* k_rows = fast.read_tile(Operand::k, p.k, k0, 0, rows_k, d, k_tile, 0, d);
      const float* v_rows = fast.read_tile(Operand::v, p.v, k0, 0, rows_k, e, v_tile, 0, e);
      // P and dS recomputed as in the dK/dV pass; forward: S = scale Q K^T  ->  dQ = scale dS K
      // (scale applied once, below)
      flash_kernels::DqTile step;
      step.q_t = q_tile.data();
      step.do_t = do_tile.data();
      step.q_packed = q_packed;
      step.do_packed = do_packed;
      step.lse = lse.data();
      step.delta = delta.data();
      step.k = k_rows;
      step.v = v_rows;
      step.rows_q = rows_q;
      step.rows_k = rows_k;
      step.d = d;
      step.e = e;
      step.scale = p.scale;
      step.bits = key.bits;  // bit (query r, key c) is bit r * bk + c
      step.bit_stride = bk;
      step.s = p_tile.data();
      step.dq = dq_acc.data();
      flash_kernels::dq_tile(step);
    }
    scale_in_place(dq_acc.data(), rows_q * d, p.scale);
    fast.store(Operand::dq, dq_acc, 0, d, p.dq, q0, 0, rows_q, d);
  }
}

// The gradient phase's items: every head's key tiles, and its query tiles unless dQ is in the
// dK/dV pass.
int64_t num_gradient_items(const std::vector<HeadBackward>& heads, const FlashTiles& tiles) {
  if (heads.empty()) return 0;
  const HeadShape shape = head_shape(heads.front());
  const int64_t dq_items = tiles.dq_in_dkdv ? 0 : num_tiles(shape.seqlen_q, tiles.block_q);
  return static_cast<int64_t>(heads.size()) * (num_tiles(shape.seqlen_k, tiles.dkdv_block_k) + dq_items);
}

}  // namespace

namespace flash_detail {

void validate_heads(const std::vector<HeadBackward>& heads, const FlashTiles& tiles,
                    const FlashMask* mask) {
  for (const HeadBackward& head : heads) {
    validate(head, tiles);
    const HeadShape shape = head_shape(head);
    const HeadShape first = head_shape(heads.front());
    if (shape.seqlen_q != first.seqlen_q || shape.seqlen_k != first.seqlen_k ||
        shape.head_dim != first.head_dim || shape.head_dim_v != first.head_dim_v) {
      fail("flash backward: heads differ in shape (", shape.seqlen_q, " x ", shape.seqlen_k, " x ",
           shape.head_dim, " x ", shape.head_dim_v, " vs ", first.seqlen_q, " x ", first.seqlen_k,
           " x ", first.head_dim, " x ", first.head_dim_v, ")");
    }
    check_mask("flash backward", mask, shape, tiles, Pass::backward);
  }
  flash_kernels::kernel_isa();  // chooses the kernels (a bad SPATTN_KERNELS fails here, not later)
}

void backward_delta_worker(io::FastMemory& fast, const std::vector<HeadBackward>& heads,
                           const FlashTiles& tiles, int worker, int workers) {
  if (heads.empty()) return;
  delta_nest(fast, heads, head_shape(heads.front()), tiles.block_q, worker, workers);
}

// The gradient items: heads x key tiles (dK/dV), then heads x query tiles (dQ), as one list
// (gradient_split); `items` ascend, so the dK/dV pass's come first.
void backward_gradient_worker(io::FastMemory& fast, const std::vector<HeadBackward>& heads,
                              const FlashTiles& tiles, const FlashMask* mask, const std::vector<int64_t>& items) {
  if (heads.empty()) return;
  const HeadShape shape = head_shape(heads.front());
  const int64_t dkdv_items =
      static_cast<int64_t>(heads.size()) * num_tiles(shape.seqlen_k, tiles.dkdv_block_k);
  const auto first_dq = std::lower_bound(items.begin(), items.end(), dkdv_items);
  std::vector<int64_t> dq_items(first_dq, items.end());
  for (int64_t& item : dq_items) item -= dkdv_items;
  dkdv_nest(fast, heads, shape, tiles.dkdv_block_k, tiles.dkdv_block_q, mask, std::vector<int64_t>(items.begin(), first_dq),
            nullptr);
  dq_nest(fast, heads, shape, tiles.block_q, tiles.block_k, mask, dq_items);
}

}  // namespace flash_detail

void flash_backward(io::FastMemory& fast, const HeadBackward& problem, const FlashTiles& tiles,
                    const FlashMask* mask) {
  const std::vector<HeadBackward> heads{problem};
  validate_heads(heads, tiles, mask);
  backward_delta_worker(fast, heads, tiles, 0, 1);
  if (tiles.dq_in_dkdv) return fused_gradients([&](int) -> io::FastMemory& { return fast; }, 1, heads, tiles, mask);
  backward_gradient_worker(fast, heads, tiles, mask, gradient_split(head_shape(problem), 1, tiles, mask, 1).front());
}

void flash_backward_heads(const FlashTeam& team, const std::vector<HeadBackward>& heads,
                          const FlashTiles& tiles, const FlashMask* mask) {
  validate_heads(heads, tiles, mask);
  if (heads.empty()) return;
  const int64_t items = num_gradient_items(heads, tiles);
  const int workers = static_cast<int>(std::clamp<int64_t>(items, 1, std::max(team.threads, 1)));
  cpu::WorkerMemories memories(workers, team.cache_words, team.ledger, team.schedule);
  // Phase 1, D for every query tile; phase 2 (after all of D is written), the gradients.
  cpu::run_workers(workers, [&](int worker) {
    backward_delta_worker(memories[worker], heads, tiles, worker, workers);
  });
  if (tiles.dq_in_dkdv) {
    fused_gradients([&](int worker) -> io::FastMemory& { return memories[worker]; }, workers, heads, tiles, mask);
    memories.merge_ledgers();
    return;
  }
  const std::vector<std::vector<int64_t>> split =
      gradient_split(head_shape(heads.front()), static_cast<int64_t>(heads.size()), tiles, mask, workers);
  cpu::run_workers(workers, [&](int worker) {
    backward_gradient_worker(memories[worker], heads, tiles, mask, split[static_cast<size_t>(worker)]);
  });
  memories.merge_ledgers();
}

}  // namespace spattn::schedules
