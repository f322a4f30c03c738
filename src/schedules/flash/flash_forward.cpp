// The flash forward (flash.hpp, docs/flash.md, docs/block_sparse.md): per query tile, stream the
// key tiles it visits (all, or the mask's list) through an online softmax, then write O and LSE
// once. Masked scores are -inf, so a row's softmax covers exactly its attended keys. The query
// tiles of all heads are split over a team of workers (flash_heads.hpp); the arithmetic on the
// tiles is flash_kernels.hpp's.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "cpu/kernels/flash_kernels.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/flash/flash_pairs.hpp"
#include "schedules/flash/flash_split.hpp"

#include "cpu/workers.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace spattn::schedules {

using io::Operand;
using namespace flash_detail;

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

namespace flash_detail {

void validate_heads(const std::vector<HeadForward>& heads, const FlashTiles& tiles,
                    const FlashMask* mask) {
  for (const HeadForward& head : heads) {
    validate(head, tiles);
    const HeadShape shape = head_shape(head);
    const HeadShape first = head_shape(heads.front());
    if (shape.seqlen_q != first.seqlen_q || shape.seqlen_k != first.seqlen_k ||
        shape.head_dim != first.head_dim || shape.head_dim_v != first.head_dim_v) {
      fail("flash forward: heads differ in shape (", shape.seqlen_q, " x ", shape.seqlen_k, " x ",
           shape.head_dim, " x ", shape.head_dim_v, " vs ", first.seqlen_q, " x ", first.seqlen_k,
           " x ", first.head_dim, " x ", first.head_dim_v, ")");
    }
    check_mask("flash forward", mask, shape, tiles, Pass::forward);
  }
  flash_kernels::kernel_isa();  // chooses the kernels (a bad SPATTN_KERNELS fails here, not later)
}

void forward_worker(io::FastMemory& fast, const std::vector<HeadForward>& heads,
                    const FlashTiles& tiles, const FlashMask* mask, const std::vector<int64_t>& items) {
  if (heads.empty()) return;
  const HeadShape shape = head_shape(heads.front());
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const int64_t bq = tiles.block_q, bk = tiles.block_k;

  // Resident: bq (d + e + 2) + bk (d + e) + bq bk words (flash_resident_words), plus the mask's
  // flash_mask_resident_words(bq, bk) index words when masked (held by `keys`).
  auto q_tile = fast.allocate<float>(bq * d, "Q tile");      // (d, rows_q): Q_i transposed
  auto acc = fast.allocate<float>(bq * e, "O accumulator");  // (rows_q, e)
  auto row_max = fast.allocate<float>(bq, "row max");        // (bq), becomes LSE
  auto row_sum = fast.allocate<float>(bq, "row sum");        // (bq)
  auto k_tile = fast.allocate<float>(bk * d, "K tile");      // (rows_k, d)
  auto v_tile = fast.allocate<float>(bk * e, "V tile");      // (rows_k, e)
  auto s_tile = fast.allocate<float>(bq * bk, "S/P tile");   // (rows_k, rows_q), packed

  const int64_t num_q_tiles = num_tiles(n_q, bq);
  TileWalker keys = key_tiles_of(fast, mask, num_tiles(n_k, bk));
  for (const int64_t item : items) {
    const HeadForward& problem = heads[static_cast<size_t>(item / num_q_tiles)];
    const int64_t qt = item % num_q_tiles;
    const int64_t q0 = qt * bq;
    const int64_t rows_q = tile_rows(n_q, bq, qt);
    std::fill(acc.data(), acc.data() + rows_q * e, 0.0f);
    std::fill(row_max.data(), row_max.data() + rows_q, kNegInf);
    std::fill(row_sum.data(), row_sum.data() + rows_q, 0.0f);

    bool q_packed = false;
    if (keys.start(qt)) {
      fast.load(Operand::q, problem.q.transposed(), 0, q0, d, rows_q, q_tile, 0, rows_q);
      q_packed = pack_bf16_pairs_where_taken(q_tile.data(), d, rows_q, problem.q, problem.k);
    }
    while (keys.more()) {
      const VisitedTile key = keys.next();
      const int64_t k0 = key.tile * bk;
      const int64_t rows_k = tile_rows(n_k, bk, key.tile);
      // (read in place where the rows already lie as the tiles would: io.hpp, read_tile)
      const float* k_rows = fast.read_tile(Operand::k, problem.k, k0, 0, rows_k, d, k_tile, 0, d);
      const float* v_rows = fast.read_tile(Operand::v, problem.v, k0, 0, rows_k, e, v_tile, 0, e);
      flash_kernels::ForwardTile step;
      step.q_t = q_tile.data();
      step.q_packed = q_packed;
      step.k = k_rows;
      step.v = v_rows;
      step.rows_q = rows_q;
      step.rows_k = rows_k;
      step.d = d;
      step.e = e;
      step.scale = problem.scale;
      step.bits = key.bits;  // a partial tile's bit (query r, key c) is bit r * bk + c
      step.bit_stride = bk;
      step.s = s_tile.data();
      step.row_max = row_max.data();
      step.row_sum = row_sum.data();
      step.acc = acc.data();
      flash_kernels::forward_tile(step);
    }
    finalize_rows(rows_q, e, row_max.data(), row_sum.data(), acc.data());
    fast.store(Operand::o, acc, 0, e, problem.o, q0, 0, rows_q, e);
    fast.store(Operand::lse, row_max, 0, 1, problem.lse, q0, 0, rows_q, 1);
  }
}

}  // namespace flash_detail

void flash_forward(io::FastMemory& fast, const HeadForward& problem, const FlashTiles& tiles,
                   const FlashMask* mask) {
  const std::vector<HeadForward> heads{problem};
  validate_heads(heads, tiles, mask);
  forward_worker(fast, heads, tiles, mask, forward_split(head_shape(problem), 1, tiles, mask, 1).front());
}

void flash_forward_heads(const FlashTeam& team, const std::vector<HeadForward>& heads,
                         const FlashTiles& tiles, const FlashMask* mask) {
  validate_heads(heads, tiles, mask);
  if (heads.empty()) return;
  const int64_t items = static_cast<int64_t>(heads.size()) *
                        num_tiles(head_shape(heads.front()).seqlen_q, tiles.block_q);
  const int workers = static_cast<int>(std::clamp<int64_t>(items, 1, std::max(team.threads, 1)));
  cpu::WorkerMemories memories(workers, team.cache_words, team.ledger, team.schedule);
  const std::vector<std::vector<int64_t>> split =
      forward_split(head_shape(heads.front()), static_cast<int64_t>(heads.size()), tiles, mask, workers);
  cpu::run_workers(workers, [&](int worker) {
    forward_worker(memories[worker], heads, tiles, mask, split[static_cast<size_t>(worker)]);
  });
  memories.merge_ledgers();
}

}  // namespace spattn::schedules
