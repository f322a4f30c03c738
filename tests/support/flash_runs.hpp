// The flash schedule run on a HeadFixture at fast memory M: counted into `ledger` when one is given,
// natively otherwise; the dense schedule, or the block-sparse one when a FlashMask is given.
#pragma once

#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "support/head_fixture.hpp"

#include <cstdint>

namespace spattn::testing {

inline void run_flash_forward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                              const schedules::FlashMask* mask = nullptr, io::Ledger* ledger = nullptr) {
  io::FastMemory fast(cache_words, ledger, mask != nullptr ? "block-sparse flash forward" : "flash forward");
  schedules::flash_forward(fast, head.forward(), tiles, mask);
}

// Reads the head's o and lse as the forward left them.
inline void run_flash_backward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                               const schedules::FlashMask* mask = nullptr, io::Ledger* ledger = nullptr) {
  io::FastMemory fast(cache_words, ledger, mask != nullptr ? "block-sparse flash backward" : "flash backward");
  schedules::flash_backward(fast, head.backward(), tiles, mask);
}

// The words a counted run moved.
inline io::Ledger count_flash_forward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                                      const schedules::FlashMask* mask = nullptr) {
  io::Ledger ledger;
  run_flash_forward(head, tiles, cache_words, mask, &ledger);
  return ledger;
}
inline io::Ledger count_flash_backward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                                       const schedules::FlashMask* mask = nullptr) {
  io::Ledger ledger;
  run_flash_backward(head, tiles, cache_words, mask, &ledger);
  return ledger;
}

// The same, counted in lines of `line_words` words.
inline io::Ledger count_flash_forward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                                      const schedules::FlashMask* mask, int64_t line_words) {
  io::Ledger ledger(line_words);
  run_flash_forward(head, tiles, cache_words, mask, &ledger);
  return ledger;
}
inline io::Ledger count_flash_backward(HeadFixture& head, const schedules::FlashTiles& tiles, int64_t cache_words,
                                       const schedules::FlashMask* mask, int64_t line_words) {
  io::Ledger ledger(line_words);
  run_flash_backward(head, tiles, cache_words, mask, &ledger);
  return ledger;
}

}  // namespace spattn::testing
