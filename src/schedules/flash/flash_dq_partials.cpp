// dQ's float32 partial sums for a 16-bit fused backward (flash_dq_partials.hpp).
#include "schedules/flash/flash_dq_partials.hpp"

#include "schedules/flash/flash_mask.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cstdint>
#include <new>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define SPATTN_LAZY_PAGES 1
#endif

namespace spattn::schedules::flash_detail {

namespace {
constexpr int64_t kReleaseWords = int64_t{1} << 20;  // 4 MiB of float32
}  // namespace

// Zeroed memory whose pages are touched only when written and can be given back (mmap where the
// system has it; elsewhere plain memory that is never given back early).
struct DqPartials::Pages {
  explicit Pages(int64_t words) : bytes(static_cast<size_t>(words) * sizeof(float)) {
    if (bytes == 0) return;
#if defined(SPATTN_LAZY_PAGES)
    void* mapped = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
      throw RuntimeError("flash backward: could not map " + std::to_string(bytes) + " bytes for dQ's float32 partial sums");
    }
    data = static_cast<float*>(mapped);
    page_bytes = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
#else
    owned.reset(new (std::nothrow) float[static_cast<size_t>(words)]);
    if (owned == nullptr) {
      throw RuntimeError("flash backward: could not allocate " + std::to_string(bytes) + " bytes for dQ's partial sums");
    }
    data = owned.get();
#endif
  }
  ~Pages() {
#if defined(SPATTN_LAZY_PAGES)
    if (data != nullptr) munmap(data, bytes);
#endif
  }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;

  // Gives back the whole pages inside words [begin, end); returns the word where the next release
  // may start (the end of the last page given back, or begin).
  int64_t release(int64_t begin, int64_t end) {
#if defined(SPATTN_LAZY_PAGES)
    const int64_t page_words = page_bytes / static_cast<int64_t>(sizeof(float));
    if (page_words <= 0) return begin;
    const int64_t first = (begin + page_words - 1) / page_words * page_words;
    const int64_t last = end / page_words * page_words;
    if (last <= first) return begin;
    // (MADV_DONTNEED on a private anonymous mapping: the pages read as zero if touched again.)
    madvise(data + first, static_cast<size_t>(last - first) * sizeof(float), MADV_DONTNEED);
    return last;
#else
    (void)end;
    return begin;
#endif
  }

  size_t bytes = 0;
  float* data = nullptr;
  int64_t page_bytes = 0;
#if !defined(SPATTN_LAZY_PAGES)
  std::unique_ptr<float[]> owned;
#endif
};

DqPartials::DqPartials(const std::vector<HeadBackward>& heads, const HeadShape& shape, const FlashTiles& tiles,
                       const FlashMask* mask)
    : num_q_tiles_(num_tiles(shape.seqlen_q, tiles.dkdv_block_q)), cq_(tiles.dkdv_block_q) {
  const int64_t n_q = shape.seqlen_q, d = shape.head_dim;
  const auto num_heads = static_cast<int64_t>(heads.size());
  // The sums' strides: the same stored-row direction as dq (io::stored_along), so that every move
  // touches as many lines as the same move of dq would.
  int64_t row_stride = 0, col_stride = 0;
  switch (heads.empty() ? io::StoredAlong::cols : heads.front().dq.stored_along()) {
    case io::StoredAlong::cols:  // rows of head_dim words (2 for one column: not a column vector)
      row_stride = std::max<int64_t>(d, 2);
      col_stride = 1;
      head_words_ = n_q * row_stride;
      tile_row_words_ = row_stride;
      break;
    case io::StoredAlong::rows:  // columns of seqlen_q words (2 for one row: not a row)
      row_stride = 1;
      col_stride = std::max<int64_t>(n_q, 2);
      head_words_ = d * col_stride;
      break;
    case io::StoredAlong::neither:  // no unit stride: a line per word, as dq's
      row_stride = 2 * d;
      col_stride = 2;
      head_words_ = 2 * n_q * d;
      break;
  }
  pages_ = std::make_unique<Pages>(num_heads * head_words_);
  for (int64_t h = 0; h < num_heads; ++h) {
    views_.emplace_back(pages_->data + h * head_words_, n_q, d, row_stride, col_stride);
  }
  // Visits per query tile: every key tile's, or those of the key lists holding it.
  std::vector<int64_t> visits(static_cast<size_t>(num_q_tiles_), num_tiles(shape.seqlen_k, tiles.dkdv_block_k));
  if (mask != nullptr) {
    std::vector<int64_t> starts(static_cast<size_t>(num_q_tiles_) + 1, 0);  // runs starting minus ending
    const FlashTileLists& lists = mask->key_cols;
    for (int64_t run = 0; run < lists.num_runs(); ++run) {
      starts[static_cast<size_t>(lists.run_first(run))] += 1;
      starts[static_cast<size_t>(lists.run_first(run) + lists.run_count(run))] -= 1;
    }
    int64_t open = 0;
    for (int64_t t = 0; t < num_q_tiles_; ++t) visits[static_cast<size_t>(t)] = open += starts[static_cast<size_t>(t)];
  }
  visits_left_.reserve(static_cast<size_t>(num_heads * num_q_tiles_));
  for (int64_t h = 0; h < num_heads; ++h) visits_left_.insert(visits_left_.end(), visits.begin(), visits.end());
  // A tile no key tile visits is finished from the start (it never holds sums).
  done_.reserve(visits_left_.size());
  for (const int64_t left : visits_left_) done_.push_back(left == 0 ? 1 : 0);
  lowest_open_.assign(static_cast<size_t>(num_heads), 0);
  released_words_.resize(static_cast<size_t>(num_heads));
  for (int64_t h = 0; h < num_heads; ++h) released_words_[static_cast<size_t>(h)] = h * head_words_;
}

DqPartials::~DqPartials() = default;

bool DqPartials::last_visit(int64_t head, int64_t tile) {
  int64_t& left = visits_left_[static_cast<size_t>(head * num_q_tiles_ + tile)];
  if (left <= 0) {
    throw RuntimeError("flash backward: query tile " + std::to_string(tile) + " visited more often than its key lists hold");
  }
  return --left == 0;
}

void DqPartials::finished(int64_t head, int64_t tile) {
  if (tile_row_words_ == 0) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto h = static_cast<size_t>(head);
  done_[static_cast<size_t>(head * num_q_tiles_ + tile)] = 1;
  int64_t& lowest = lowest_open_[h];
  const int64_t before = lowest;
  while (lowest < num_q_tiles_ && done_[static_cast<size_t>(head * num_q_tiles_ + lowest)] != 0) ++lowest;
  if (lowest == before) return;
  // Every row below the lowest open tile is finished: its words are never read again.
  const int64_t end = head * head_words_ + std::min(lowest * cq_, views_[h].rows()) * tile_row_words_;
  // In runs of kReleaseWords or more, or the rest of a finished head: each release is a system call
  // that stops every worker's core to flush its page table entries (given back a page at a time,
  // it took a third of a two-worker window's backward).
  if (end - released_words_[h] >= kReleaseWords || lowest == num_q_tiles_) {
    released_words_[h] = pages_->release(released_words_[h], end);
  }
}

}  // namespace spattn::schedules::flash_detail
