// The order in which the workers of a backward with dQ in the dK/dV pass (FlashTiles::dq_in_dkdv)
// add their terms to a dQ tile: increasing key tile, whatever the workers, so that the bits do not
// depend on the thread count (docs/flash.md, "How dQ is accumulated").
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace spattn::schedules::flash_detail {

// Where each worker is in its ascending list of items (head * key tiles + key tile): one word per
// worker, (index of its current item) << 32 | (query tiles of that item's list it has finished
// adding to dQ: every one below this tile), on a line of its own.
class DqTurns {
 public:
  DqTurns(const std::vector<std::vector<int64_t>>& split, int64_t key_tiles)
      : split_(split), key_tiles_(key_tiles), states_(split.size()) {}

  void start_item(int worker, size_t index) { publish(worker, index, 0); }
  void finished_query_tile(int worker, size_t index, int64_t tile) { publish(worker, index, tile + 1); }
  void finish(int worker) { publish(worker, split_[static_cast<size_t>(worker)].size(), 0); }

  // Waits until every term of dQ's query tile `tile` from the key tiles of `item`'s head below
  // item's is added: each other worker is past such items (its current item is later, or it
  // holds no item of this head before `item` besides its current one, whose list it has finished
  // up to `tile`). The smallest (item, tile) waiting never waits on a later one, so all proceed.
  void wait_turn(int worker, int64_t item, int64_t tile) const {
    for (size_t w = 0; w < split_.size(); ++w) {
      if (static_cast<int>(w) == worker) continue;
      for (int spins = 0; !clear(w, item, tile); ++spins) {
        if (spins >= kSpinsBeforeYield) std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  struct alignas(64) State {
    std::atomic<uint64_t> word{0};
  };

  void publish(int worker, size_t index, int64_t tiles_done) {
    states_[static_cast<size_t>(worker)].word.store(
        static_cast<uint64_t>(index) << 32 | static_cast<uint64_t>(tiles_done), std::memory_order_release);
  }

  bool clear(size_t w, int64_t item, int64_t tile) const {
    const uint64_t word = states_[w].word.load(std::memory_order_acquire);
    const auto index = static_cast<size_t>(word >> 32);
    const std::vector<int64_t>& items = split_[w];
    if (index >= items.size()) return true;  // finished
    const int64_t current = items[index];
    if (current > item) return true;  // everything of w's below `item` is done
    if (index + 1 < items.size() && items[index + 1] < item) return false;  // more of w's to come first
    if (current / key_tiles_ != item / key_tiles_) return true;  // another head's dQ
    return static_cast<int64_t>(word & 0xffffffffu) > tile;
  }

  const std::vector<std::vector<int64_t>>& split_;
  int64_t key_tiles_;
  std::vector<State> states_;
};

}  // namespace spattn::schedules::flash_detail
