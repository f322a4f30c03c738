// The flash backward with dQ accumulated in the dK/dV pass (FlashTiles::dq_in_dkdv; docs/flash.md,
// "How dQ is accumulated"): its gradient phase and what it decides. dkdv_nest (flash_backward.cpp)
// does the per-tile work: per key tile, for every query tile it visits, P, dV += P^T dO, dS,
// dK += dS^T Q as in the two-pass backward, then dQ_i += dS (scale K_j), dQ_i read from slow memory
// and written back (its first visit starts from 0). Each product is computed once: 5 a pair,
// where the two-pass backward computes S and dP again in its dQ pass (7).
//
// Order: every query tile's dQ adds its key tiles' terms in increasing key-tile order, whatever
// the workers (flash_dq_turns.hpp), so the bits do not depend on the thread count. A 16-bit dQ
// adds them in float32 and is rounded once, at its last term (flash_dq_partials.hpp). Query tiles
// no key tile visits get dQ = 0 in a last phase (cq-row tiles).
#include "schedules/flash/flash_backward_fused.hpp"

#include "cpu/workers.hpp"
#include "schedules/flash/flash_dq_partials.hpp"
#include "schedules/flash/flash_dq_turns.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/flash/flash_split.hpp"

#include <algorithm>
#include <memory>

namespace spattn::schedules::flash_detail {

using io::Operand;

namespace {

// dQ = 0 on the query tiles (cq rows) of `worker`'s share that no key tile visited.
void zero_unvisited(io::FastMemory& fast, const std::vector<HeadBackward>& heads, const HeadShape& shape,
                    int64_t cq, const std::vector<uint8_t>& visited, int worker, int workers) {
  const int64_t d = shape.head_dim, num_q_tiles = num_tiles(shape.seqlen_q, cq);
  auto zeros = fast.allocate<float>(cq * d, "dQ tile");
  std::fill(zeros.data(), zeros.data() + cq * d, 0.0f);
  cpu::for_each_item(worker, workers, static_cast<int64_t>(visited.size()), [&](int64_t item) {
    if (visited[static_cast<size_t>(item)] != 0) return;
    const int64_t qt = item % num_q_tiles;
    const HeadBackward& p = heads[static_cast<size_t>(item / num_q_tiles)];
    fast.store(Operand::dq, zeros, 0, d, p.dq, qt * cq, 0, tile_rows(shape.seqlen_q, cq, qt), d);
  });
}

}  // namespace

bool key_spans_ascend(const FlashTileLists& key_cols) {
  int64_t first = 0, last = 0;
  for (int64_t kt = 0; kt < key_cols.num_outer_tiles(); ++kt) {
    const int64_t begin = key_cols.run_ptr[static_cast<size_t>(kt)], end = key_cols.run_ptr[static_cast<size_t>(kt) + 1];
    if (begin == end) continue;
    const int64_t list_first = key_cols.run_first(begin);
    const int64_t list_last = key_cols.run_first(end - 1) + key_cols.run_count(end - 1) - 1;
    if (list_first < first || list_last < last) return false;
    first = list_first;
    last = list_last;
  }
  return true;
}

void fused_gradients(const std::function<io::FastMemory&(int)>& memory, int workers,
                     const std::vector<HeadBackward>& heads, const FlashTiles& tiles, const FlashMask* mask) {
  if (heads.empty()) return;
  const HeadShape shape = head_shape(heads.front());
  const auto num_heads = static_cast<int64_t>(heads.size());
  std::vector<uint8_t> visited(static_cast<size_t>(num_heads * num_tiles(shape.seqlen_q, tiles.dkdv_block_q)), 0);
  const std::vector<std::vector<int64_t>> split = fused_gradient_split(shape, num_heads, tiles, mask, workers);
  const int64_t ck = tiles.dkdv_block_k, cq = tiles.dkdv_block_q;
  std::unique_ptr<DqPartials> partials;
  if (std::any_of(heads.begin(), heads.end(), [](const HeadBackward& h) { return h.dq.storage() != io::Storage::native; })) {
    partials = std::make_unique<DqPartials>(heads, shape, tiles, mask);
  }
  if (workers == 1) {
    const DqInDkdv alone{nullptr, 0, &visited, partials.get()};
    dkdv_nest(memory(0), heads, shape, ck, cq, mask, split.front(), &alone);
  } else {
    DqTurns turns(split, num_tiles(shape.seqlen_k, ck));
    cpu::run_workers(workers, [&](int worker) {
      try {
        const DqInDkdv ordered{&turns, worker, &visited, partials.get()};
        dkdv_nest(memory(worker), heads, shape, ck, cq, mask, split[static_cast<size_t>(worker)], &ordered);
      } catch (...) {
        turns.finish(worker);  // the others stop waiting for it; the call rethrows
        throw;
      }
    });
  }
  if (std::all_of(visited.begin(), visited.end(), [](uint8_t v) { return v != 0; })) return;
  cpu::run_workers(workers, [&](int worker) {
    zero_unvisited(memory(worker), heads, shape, tiles.dkdv_block_q, visited, worker, workers);
  });
}

}  // namespace spattn::schedules::flash_detail
