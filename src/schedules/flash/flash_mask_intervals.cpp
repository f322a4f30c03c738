// The tile lists of an interval mask by interval arithmetic (flash_mask.hpp, interval_lists): per
// outer tile, spans of inner tiles, never a step per tile between them.
#include "schedules/flash/flash_mask.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace spattn::schedules::flash_detail {
namespace {

using Span = std::pair<int64_t, int64_t>;  // inner tiles [first, last], inclusive

// Sorts `spans` and merges those that overlap or touch.
void merge_spans(std::vector<Span>& spans) {
  std::sort(spans.begin(), spans.end());
  size_t out = 0;
  for (const Span& span : spans) {
    if (out > 0 && span.first <= spans[out - 1].second + 1) {
      spans[out - 1].second = std::max(spans[out - 1].second, span.second);
    } else {
      spans[out++] = span;
    }
  }
  spans.resize(out);
}

// a := a ∩ b, both sorted and disjoint.
void intersect_spans(std::vector<Span>& a, const std::vector<Span>& b, std::vector<Span>& scratch) {
  scratch.clear();
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t first = std::max(a[i].first, b[j].first), last = std::min(a[i].second, b[j].second);
    if (first <= last) scratch.emplace_back(first, last);
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  a.swap(scratch);
}

// Whether rows a and b of the mask have the same intervals.
bool same_row(const sparse_formats::IntervalPattern& mask, int64_t a, int64_t b) {
  const int64_t count = mask.row_end(a) - mask.row_begin(a);
  if (count != mask.row_end(b) - mask.row_begin(b)) return false;
  const auto at = [](const std::vector<int64_t>& v, int64_t k) { return v.begin() + static_cast<std::ptrdiff_t>(k); };
  return std::equal(at(mask.begin, mask.row_begin(a)), at(mask.begin, mask.row_end(a)), at(mask.begin, mask.row_begin(b))) &&
         std::equal(at(mask.end, mask.row_begin(a)), at(mask.end, mask.row_end(a)), at(mask.end, mask.row_begin(b)));
}

}  // namespace

FlashTileLists interval_lists(const sparse_formats::IntervalPattern& mask, int64_t outer_block, int64_t inner_block) {
  if (outer_block < 1 || inner_block < 1) {
    fail("interval_lists: tiles of ", outer_block, " x ", inner_block, " rows must be positive");
  }
  FlashTileLists lists;
  lists.outer_rows = mask.num_rows;
  lists.inner_rows = mask.num_cols;
  lists.outer_block = outer_block;
  lists.inner_block = inner_block;
  lists.bit_words = sparse_formats::ceil_div(outer_block * inner_block, 64);
  const int64_t num_outer = num_tiles(mask.num_rows, outer_block), n = mask.num_cols;
  lists.run_ptr.assign(static_cast<size_t>(num_outer) + 1, 0);
  lists.partial_ptr.assign(static_cast<size_t>(num_outer) + 1, 0);

  std::vector<Span> touched, full, row_full, scratch;
  struct PartialRun {
    int64_t first, count, slot;  // inner tiles [first, first + count), the first one's bit set
  };
  std::vector<PartialRun> partial_runs;
  for (int64_t i = 0; i < num_outer; ++i) {
    const int64_t r0 = i * outer_block, r1 = r0 + tile_rows(mask.num_rows, outer_block, i);
    touched.clear();
    bool first_row = true;
    for (int64_t r = r0; r < r1; ++r) {
      // A row repeating the one before it (a block's, a document's rows) touches and covers the same.
      if (r > r0 && same_row(mask, r, r - 1)) continue;
      // The row's touched tiles and the tiles it covers whole (touching intervals joined first).
      row_full.clear();
      for (int64_t k = mask.row_begin(r); k < mask.row_end(r);) {
        const int64_t lo = mask.begin[static_cast<size_t>(k)];
        int64_t hi = mask.end[static_cast<size_t>(k)];
        for (++k; k < mask.row_end(r) && mask.begin[static_cast<size_t>(k)] == hi; ++k) hi = mask.end[static_cast<size_t>(k)];
        touched.emplace_back(lo / inner_block, (hi - 1) / inner_block);
        const int64_t whole_first = (lo + inner_block - 1) / inner_block;
        const int64_t whole_last = hi == n ? (n - 1) / inner_block : hi / inner_block - 1;  // the last tile may be short
        if (whole_first <= whole_last) row_full.emplace_back(whole_first, whole_last);
      }
      if (first_row) {
        full = row_full;
        first_row = false;
      } else if (!full.empty()) {
        intersect_spans(full, row_full, scratch);
      }
    }
    merge_spans(touched);
    // Runs: each touched span cut by the full spans inside it.
    partial_runs.clear();
    size_t f = 0;
    for (const Span& span : touched) {
      int64_t at = span.first;
      for (; f < full.size() && full[f].first <= span.second; ++f) {
        if (full[f].first > at) {  // partial tiles before the full ones
          partial_runs.push_back({at, full[f].first - at, 0});
          lists.append_run(at, full[f].first - at, true);
        }
        lists.append_run(full[f].first, full[f].second - full[f].first + 1, false);
        at = full[f].second + 1;
      }
      if (at <= span.second) {
        partial_runs.push_back({at, span.second - at + 1, 0});
        lists.append_run(at, span.second - at + 1, true);
      }
    }
    // The partial tiles' bit sets, in list order: each row's intervals set their runs in the partial
    // tiles they reach (found among the partial runs by position, never walking the full ones).
    int64_t slot = lists.partial_ptr[static_cast<size_t>(i)];
    for (PartialRun& run : partial_runs) {
      run.slot = slot;
      slot += run.count;
    }
    lists.bits.resize(static_cast<size_t>(slot * lists.bit_words), 0);
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t k = mask.row_begin(r); k < mask.row_end(r); ++k) {
        const int64_t lo = mask.begin[static_cast<size_t>(k)], hi = mask.end[static_cast<size_t>(k)];
        const int64_t first = lo / inner_block, last = (hi - 1) / inner_block;
        auto run = std::upper_bound(partial_runs.begin(), partial_runs.end(), first,
                                    [](int64_t tile, const PartialRun& p) { return tile < p.first + p.count; });
        for (; run != partial_runs.end() && run->first <= last; ++run) {
          const int64_t from = std::max(first, run->first), to = std::min(last, run->first + run->count - 1);
          for (int64_t tile = from; tile <= to; ++tile) {
            const int64_t c0 = std::max(lo, tile * inner_block) - tile * inner_block;
            const int64_t c1 = std::min(hi, (tile + 1) * inner_block) - tile * inner_block;
            uint64_t* bits = lists.bits.data() + (run->slot + tile - run->first) * lists.bit_words;
            sparse_formats::set_bit_range(bits, (r - r0) * inner_block + c0, (r - r0) * inner_block + c1);
          }
        }
      }
    }
    lists.run_ptr[static_cast<size_t>(i) + 1] = lists.num_runs();
    lists.partial_ptr[static_cast<size_t>(i) + 1] = slot;
  }
  return lists;
}

}  // namespace spattn::schedules::flash_detail
