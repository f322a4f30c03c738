// The flash backward's gradient phase with dQ in the dK/dV pass (FlashTiles::dq_in_dkdv),
// flash_backward_fused.cpp. flash_backward.cpp runs the D pre-pass before it, as for the two-pass
// backward.
#pragma once

#include "schedules/flash/flash.hpp"

#include <spattn/io.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace spattn::schedules {

struct FlashMask;
struct FlashTileLists;

namespace flash_detail {

// Whether workers adding dQ's terms in key-tile order follow one another without long waits over
// these key tiles' lists (a FlashMask's key_cols): the first and the last query tile each
// non-empty list visits never decrease from one key tile to the next (a full mask, causal,
// windows, documents, prefix-LM). A key tile that visits query tiles far ahead of where an earlier,
// longer list has got to waits there: over BigBird's global columns and random blocks two workers
// ran the single loop 1.2x to 1.3x slower than the two passes (one worker: 0.84x).
bool key_spans_ascend(const FlashTileLists& key_cols);

class DqTurns;
class DqPartials;

// dQ in the dK/dV pass, for one worker's run of dkdv_nest: who orders the terms (nullptr: one
// worker), which dQ tiles (heads x query tiles) hold a term already, and where a 16-bit dQ's
// sums are kept until its last term (nullptr: a float32 dq holds them itself).
struct DqInDkdv {
  DqTurns* turns = nullptr;
  int worker = 0;
  std::vector<uint8_t>* visited = nullptr;
  DqPartials* partials = nullptr;
};

// The dK/dV pass over `items` (item = head * key tiles + key tile; flash_backward.cpp): per key
// tile of ck rows, the query tiles of cq rows it visits. With `dq`, each tile's dQ term too, added
// to dQ in slow memory in `dq`'s order. Resident: ck (2 d + 2 e) + cq (d + e + 2) + cq ck
// (fused_dkdv_nest's with dq) + the mask's index words.
void dkdv_nest(io::FastMemory& fast, const std::vector<HeadBackward>& heads, const HeadShape& shape, int64_t ck,
               int64_t cq, const FlashMask* mask, const std::vector<int64_t>& items, const DqInDkdv* dq);

// dK, dV and dQ of every head (D already written), on `workers` workers, worker w in memory(w):
// key tiles split by work (fused_gradient_split), dQ's terms added in key-tile order (a 16-bit
// dQ's in float32, flash_dq_partials.hpp); then dQ = 0 on the query tiles no key tile visits.
void fused_gradients(const std::function<io::FastMemory&(int)>& memory, int workers,
                     const std::vector<HeadBackward>& heads, const FlashTiles& tiles, const FlashMask* mask);

}  // namespace flash_detail
}  // namespace spattn::schedules
