// dQ's float32 partial sums for a backward with dQ in the dK/dV pass (FlashTiles::dq_in_dkdv)
// whose dq holds 16-bit elements (docs/flash.md, "How dQ is accumulated").
//
// The pass adds each visited key tile's term to dQ_i in slow memory; rounding dQ_i to bfloat16 or
// float16 after every term would carry a rounding per key tile into the gradient. So between its
// first and its last visit a query tile's sums live in a float32 array in slow memory, and its
// last visit stores the rounded result into dq itself. Each visit moves the same words as with a
// float32 dq (read back at every visit but the first, written at every one), and the array is laid
// out like dq (rows along the same stride), so the lines counted are the same too: the predictions
// of the fused backward hold for either element type.
//
// Memory: the array spans every head's seqlen_q x head_dim, but its pages are only touched while a
// query tile is open (visited, not yet finished), and where dq's rows run along its columns (the
// usual layout, where a query tile's rows are contiguous) the pages below the lowest open tile are
// given back as tiles finish. Over a window, causal or documents mask the open tiles are a band
// of the sequence: the partial sums take that band, not the whole of dQ.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "schedules/flash/flash.hpp"

#include <spattn/io.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace spattn::schedules {

struct FlashMask;

namespace flash_detail {

class DqPartials {
 public:
  // For `heads` (their dq seqlen_q x head_dim, laid out alike) with the fused backward's `tiles`;
  // each query tile's visits are counted from `mask`'s key lists (every key tile when nullptr).
  DqPartials(const std::vector<HeadBackward>& heads, const HeadShape& shape, const FlashTiles& tiles,
             const FlashMask* mask);
  ~DqPartials();
  DqPartials(const DqPartials&) = delete;
  DqPartials& operator=(const DqPartials&) = delete;

  // Where a visit of query tile `tile` of head `head` reads dQ_i back from: the partial sums.
  const io::SlowMatrix<float>& sums(int64_t head) const { return views_[static_cast<size_t>(head)]; }
  // Counts a visit (the caller holds the tile's turn) and returns whether it is the tile's last:
  // then its result goes to dq, and finished() follows the store.
  bool last_visit(int64_t head, int64_t tile);
  // The tile's last visit has stored dq_i: the pages of the sums below the head's lowest open tile
  // go back to the system.
  void finished(int64_t head, int64_t tile);
  // How far into head `head`'s sums, in words from its first row, the pages have been given back
  // (0 where the system has no lazy pages).
  int64_t released_words(int64_t head) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return released_words_[static_cast<size_t>(head)] - head * head_words_;
  }

 private:
  struct Pages;
  int64_t num_q_tiles_ = 0;
  int64_t cq_ = 0;
  int64_t head_words_ = 0;   // words of one head's sums
  int64_t tile_row_words_ = 0;  // words per row where a query tile's rows are contiguous (else 0: kept)
  std::unique_ptr<Pages> pages_;
  std::vector<io::SlowMatrix<float>> views_;  // per head, laid out like its dq
  std::vector<int64_t> visits_left_;          // per head and query tile
  mutable std::mutex mutex_;                  // finished(): the bookkeeping below
  std::vector<uint8_t> done_;                 // per head and query tile
  std::vector<int64_t> lowest_open_;          // per head: the first query tile not done
  std::vector<int64_t> released_words_;       // per head: words of the sums given back from its start
};

}  // namespace flash_detail
}  // namespace spattn::schedules
