// select_mask and attended_keys (include/spattn/shard.hpp): a mask restricted to some query and
// key positions, and the keys some queries attend.
#include <spattn/shard.hpp>

#include "mask/mask_cache.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/csr.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace spattn {

namespace {


// Checks one side's ranges (`side` is "rows" or "cols", `seqlen_name` "seqlen_q" or "seqlen_k")
// and returns their total length. The total is checked before the overlap, so that it is computed
// safely for any ranges; after the overlap check it is at most seqlen.
int64_t checked_total(const char* where, const std::vector<IndexRange>& ranges, const char* side,
                      const char* seqlen_name, int64_t seqlen) {
  int64_t total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const IndexRange& r = ranges[i];
    if (r.begin < 0 || r.begin > r.end || r.end > seqlen) {
      fail(where, ": ", side, "[", i, "] = [", r.begin, ", ", r.end, ") must satisfy 0 <= begin <= end <= ",
           seqlen_name, " = ", seqlen);
    }
    if (r.end - r.begin > std::numeric_limits<int64_t>::max() - total) {
      fail(where, ": the lengths of ", side, " up to ", side, "[", i, "] = [", r.begin, ", ", r.end,
           ") sum past int64 (", total, " before it)");
    }
    total += r.end - r.begin;
  }
  return total;
}

// A nonempty range with its index in the argument and where its positions start in the output.
struct PlacedRange {
  int64_t begin;
  int64_t end;
  int64_t local_begin;
  size_t index;
};

// The nonempty ranges sorted by begin, each with its output offset; refuses overlaps.
std::vector<PlacedRange> placed_by_begin(const char* where, const std::vector<IndexRange>& ranges, const char* side) {
  std::vector<PlacedRange> placed;
  placed.reserve(ranges.size());
  int64_t local = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const IndexRange& r = ranges[i];
    if (r.end > r.begin) placed.push_back({r.begin, r.end, local, i});
    local += r.end - r.begin;
  }
  std::sort(placed.begin(), placed.end(),
            [](const PlacedRange& a, const PlacedRange& b) { return a.begin < b.begin || (a.begin == b.begin && a.index < b.index); });
  for (size_t i = 1; i < placed.size(); ++i) {
    const PlacedRange& a = placed[i - 1];
    const PlacedRange& b = placed[i];
    if (b.begin < a.end) {
      fail(where, ": ", side, "[", a.index, "] = [", a.begin, ", ", a.end, ") and ", side, "[", b.index, "] = [",
           b.begin, ", ", b.end, ") overlap");
    }
  }
  return placed;
}

// Appends the selected columns of one CSR row, as output positions, to `out`. Both the row's
// columns and `cols` ascend, so the walk alternates two binary searches: skip the row's columns
// before the current range, copy those inside it, skip the ranges that end before the next
// column. It costs the columns copied plus a search per range visited, never the columns skipped.
template <typename Index>
void select_row(const Index* first, const Index* last, const std::vector<PlacedRange>& cols,
                std::vector<int64_t>& out) {
  auto range = cols.begin();
  while (first != last && range != cols.end()) {
    first = std::lower_bound(first, last, range->begin);
    for (; first != last && *first < range->end; ++first) out.push_back(*first - range->begin + range->local_begin);
    if (first == last) break;
    range = std::upper_bound(range + 1, cols.end(), *first,
                             [](int64_t column, const PlacedRange& r) { return column < r.end; });
  }
}

// select_mask over the interval form: each row's intervals meet the selected key ranges (found by
// binary search, never walked key by key) and map to output positions; a row whose ranges were
// given out of order is sorted, and touching pieces merge. O(rows x log + output intervals).
sparse_formats::IntervalPattern select_intervals(const sparse_formats::IntervalPattern& mask,
                                                 const std::vector<IndexRange>& rows, int64_t num_rows,
                                                 const std::vector<PlacedRange>& cols, int64_t num_cols,
                                                 bool cols_in_order) {
  sparse_formats::IntervalPattern out = sparse_formats::IntervalPattern::empty(num_rows, num_cols);
  std::vector<std::pair<int64_t, int64_t>> pieces;
  int64_t local_row = 0;
  for (const IndexRange& range : rows) {
    for (int64_t row = range.begin; row < range.end; ++row, ++local_row) {
      pieces.clear();
      for (int64_t k = mask.row_begin(row); k < mask.row_end(row); ++k) {
        const int64_t lo = mask.begin[static_cast<size_t>(k)], hi = mask.end[static_cast<size_t>(k)];
        auto col = std::upper_bound(cols.begin(), cols.end(), lo,
                                    [](int64_t key, const PlacedRange& r) { return key < r.end; });
        for (; col != cols.end() && col->begin < hi; ++col) {
          const int64_t first = std::max(lo, col->begin), last = std::min(hi, col->end);
          pieces.emplace_back(first - col->begin + col->local_begin, last - col->begin + col->local_begin);
        }
      }
      if (!cols_in_order) std::sort(pieces.begin(), pieces.end());
      const int64_t row_first = out.num_intervals();
      for (const auto& [first, last] : pieces) {
        if (out.num_intervals() > row_first && out.end.back() == first) {
          out.end.back() = last;
        } else {
          out.begin.push_back(first);
          out.end.push_back(last);
        }
      }
      out.row_ptr[static_cast<size_t>(local_row) + 1] = out.num_intervals();
    }
  }
  return out;
}

}  // namespace

Mask select_mask(const Mask& mask, const std::vector<IndexRange>& rows, const std::vector<IndexRange>& cols) {
  const char* where = "select_mask";
  const int64_t num_rows = checked_total(where, rows, "rows", "seqlen_q", mask.seqlen_q());
  const int64_t num_cols = checked_total(where, cols, "cols", "seqlen_k", mask.seqlen_k());
  placed_by_begin(where, rows, "rows");  // only the overlap check: rows are taken in the order given
  const std::vector<PlacedRange> placed_cols = placed_by_begin(where, cols, "cols");
  if (mask.is_full()) return Mask::full(num_rows, num_cols);

  // Output positions ascend with the global column exactly when the nonempty col ranges are given
  // in increasing order; otherwise each row is sorted after the walk.
  bool cols_in_order = true;
  for (size_t i = 1; i < placed_cols.size() && cols_in_order; ++i) {
    cols_in_order = placed_cols[i - 1].index < placed_cols[i].index;
  }

  if (const sparse_formats::IntervalPattern* intervals = mask.row_intervals()) {
    return Mask::from_intervals(select_intervals(*intervals, rows, num_rows, placed_cols, num_cols, cols_in_order), where);
  }
  std::vector<int64_t> row_ptr;
  row_ptr.reserve(static_cast<size_t>(num_rows) + 1);
  row_ptr.push_back(0);
  std::vector<int64_t> col_idx;
  detail::with_element_csr(mask, [&](const auto& csr) {
    for (const IndexRange& range : rows) {
      for (int64_t row = range.begin; row < range.end; ++row) {
        const size_t row_start = col_idx.size();
        select_row(csr.col_idx + csr.row_begin(row), csr.col_idx + csr.row_end(row), placed_cols, col_idx);
        if (!cols_in_order) std::sort(col_idx.begin() + static_cast<std::ptrdiff_t>(row_start), col_idx.end());
        row_ptr.push_back(static_cast<int64_t>(col_idx.size()));
      }
    }
  });
  sparse_formats::CsrPattern<int64_t> pattern(num_rows, num_cols, std::move(row_ptr), std::move(col_idx));
  return Mask::from_csr(std::move(pattern), where);
}

std::vector<int64_t> attended_keys(const Mask& mask, const std::vector<IndexRange>& rows) {
  const char* where = "attended_keys";
  const int64_t num_rows = checked_total(where, rows, "rows", "seqlen_q", mask.seqlen_q());
  placed_by_begin(where, rows, "rows");
  std::vector<int64_t> keys;
  if (mask.is_full()) {
    if (num_rows > 0) {
      keys.resize(static_cast<size_t>(mask.seqlen_k()));
      for (int64_t key = 0; key < mask.seqlen_k(); ++key) keys[static_cast<size_t>(key)] = key;
    }
    return keys;
  }
  if (const sparse_formats::IntervalPattern* intervals = mask.row_intervals()) {
    // The union of the rows' intervals, sorted and merged: O(intervals x log + keys), no seqlen_k scratch.
    std::vector<std::pair<int64_t, int64_t>> spans;
    for (const IndexRange& range : rows) {
      for (int64_t k = intervals->row_begin(range.begin); k < intervals->row_begin(range.end); ++k) {
        spans.emplace_back(intervals->begin[static_cast<size_t>(k)], intervals->end[static_cast<size_t>(k)]);
      }
    }
    std::sort(spans.begin(), spans.end());
    int64_t covered = 0;  // keys below this are listed
    for (const auto& [lo, hi] : spans) {
      for (int64_t key = std::max(lo, covered); key < hi; ++key) keys.push_back(key);
      covered = std::max(covered, hi);
    }
    return keys;
  }
  std::vector<char> attended(static_cast<size_t>(mask.seqlen_k()), 0);
  detail::with_element_csr(mask, [&](const auto& csr) {
    for (const IndexRange& range : rows) {
      for (int64_t p = csr.row_begin(range.begin); p < csr.row_begin(range.end); ++p) attended[static_cast<size_t>(csr.col_idx[p])] = 1;
    }
  });
  for (int64_t key = 0; key < mask.seqlen_k(); ++key) {
    if (attended[static_cast<size_t>(key)]) keys.push_back(key);
  }
  return keys;
}

}  // namespace spattn
