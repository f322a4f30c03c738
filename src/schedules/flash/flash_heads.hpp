// The flash schedule over several heads of one shape (batch x heads), on a team of workers.
//
// The outer loops of every loop nest are independent: the forward's and the dQ pass's query
// tiles, the dK/dV pass's key tiles, the D pre-pass's query tiles. A run lists them for all heads
// (item = head * tiles + tile) and gives worker w the items w, w + W, ... Each worker runs its
// items exactly as the one-head schedule (flash.hpp) would, in its own fast memory of M words:
// its buffers are allocated once per loop nest, and every output tile is computed by one worker in
// the schedule's order of operations, so results are bit-identical for any number of workers.
// The words moved are the same too (each tile is loaded and stored exactly as in the one-worker
// run), so the summed ledgers equal predict_flash_* times the heads, exactly; the peak resident
// words are one worker's (each worker's fast memory is its own).
//
// The backward runs in two phases, all workers finishing the first before any starts the second:
// the D pre-pass, then the dK/dV and dQ passes (which need all of D, and not each other), their
// items listed one after the other. With dQ in the dK/dV pass (FlashTiles::dq_in_dkdv) the second
// phase is the key tiles, every dQ tile adding its terms in key-tile order across the workers
// (flash_backward_fused.cpp), and a third writes dQ = 0 where no key tile visits.
#pragma once

#include "schedules/flash/flash.hpp"

#include <spattn/io.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::schedules {

struct FlashTeam {
  int threads = 1;               // workers (at most one per item; >= 1)
  int64_t cache_words = 0;       // M of each worker's fast memory
  io::Ledger* ledger = nullptr;  // counts all workers' moves when set
  std::string schedule = "flash";  // the name in fast-memory errors
};

// All heads must have the same shape (the tiles and mask are built for it). Validates every head
// (flash_forward's checks) before any output is written.
void flash_forward_heads(const FlashTeam& team, const std::vector<HeadForward>& heads,
                         const FlashTiles& tiles, const FlashMask* mask = nullptr);
void flash_backward_heads(const FlashTeam& team, const std::vector<HeadBackward>& heads,
                          const FlashTiles& tiles, const FlashMask* mask = nullptr);

namespace flash_detail {

// One worker's share of the forward / of a backward phase, in `fast` (a worker of `workers`).
void forward_worker(io::FastMemory& fast, const std::vector<HeadForward>& heads,
                    const FlashTiles& tiles, const FlashMask* mask, int worker, int workers);
void backward_delta_worker(io::FastMemory& fast, const std::vector<HeadBackward>& heads,
                           const FlashTiles& tiles, int worker, int workers);
void backward_gradient_worker(io::FastMemory& fast, const std::vector<HeadBackward>& heads,
                              const FlashTiles& tiles, const FlashMask* mask, int worker,
                              int workers);
// Throws as flash_forward / flash_backward do when a head's views, the tiles or the mask do not
// fit (every head, before anything runs).
void validate_heads(const std::vector<HeadForward>& heads, const FlashTiles& tiles,
                    const FlashMask* mask);
void validate_heads(const std::vector<HeadBackward>& heads, const FlashTiles& tiles,
                    const FlashMask* mask);

}  // namespace flash_detail
}  // namespace spattn::schedules
