// Between the interval and block forms of a mask (intervals.hpp).
//
// intervals_to_bsr_mask re-blocks by interval arithmetic: per block row, the block columns its intervals reach are merged into spans; a block's attended pairs
// are counted from each interval's two end blocks plus a difference array of the blocks it covers
// whole; only partial blocks get bits, set a row's run at a time.
#include <sparse_formats/intervals.hpp>

#include <sparse_formats/convert.hpp>

#include <sparse_formats/error.hpp>

#include "format_internal.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace sparse_formats {

using internal::blocks_along;
using internal::to_size;

namespace {

// The block columns one block row visits: sorted, disjoint spans [first, last] of block columns,
// each holding its blocks' positions in the row's list from `offset` on.
struct BlockSpans {
  std::vector<std::pair<int64_t, int64_t>> spans;  // (first, last) block columns, inclusive
  std::vector<int64_t> offset;                      // (spans): list position of the span's first block
  int64_t total = 0;

  // Position of block column `block` (which must lie in a span) in the row's list.
  int64_t position(int64_t block) const {
    const auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(block, INT64_MAX));
    const size_t s = static_cast<size_t>(it - spans.begin()) - 1;
    return offset[s] + block - spans[s].first;
  }
};

// The blocks one block row of an interval mask lists, in order, and the attended pairs each holds:
// spans of the block columns its intervals reach; per listed block, the pairs of each interval's
// end blocks directly and of the blocks between by the number of rows covering them whole.
struct BlockRow {
  BlockSpans row;
  std::vector<std::pair<int64_t, int64_t>> reach;  // per interval: its first and last block column
  std::vector<int64_t> pairs, covers;               // per listed block: attended pairs; whole-row covers (differences)

  void list(const IntervalPattern& p, int64_t block_n, int64_t r0, int64_t r1) {
    const int64_t k0 = p.row_begin(r0), k1 = p.row_begin(r1);
    reach.clear();
    for (int64_t k = k0; k < k1; ++k) reach.emplace_back(p.begin[to_size(k)] / block_n, (p.end[to_size(k)] - 1) / block_n);
    std::sort(reach.begin(), reach.end());
    row.spans.clear();
    row.offset.clear();
    row.total = 0;
    for (const auto& [first, last] : reach) {
      if (!row.spans.empty() && first <= row.spans.back().second + 1) {
        row.spans.back().second = std::max(row.spans.back().second, last);
      } else {
        row.spans.emplace_back(first, last);
      }
    }
    for (const auto& [first, last] : row.spans) {
      row.offset.push_back(row.total);
      row.total += last - first + 1;
    }
    pairs.assign(to_size(row.total), 0);
    covers.assign(to_size(row.total) + 1, 0);
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t lo = p.begin[to_size(k)], hi = p.end[to_size(k)];
      const int64_t first = lo / block_n, last = (hi - 1) / block_n;
      const int64_t at = row.position(first);
      if (first == last) {
        pairs[to_size(at)] += hi - lo;
        continue;
      }
      pairs[to_size(at)] += (first + 1) * block_n - lo;
      pairs[to_size(at + last - first)] += hi - last * block_n;
      ++covers[to_size(at) + 1];  // blocks first + 1 .. last - 1 lie in one span with `first`
      --covers[to_size(at + last - first)];
    }
    int64_t depth = 0;
    for_each_block([&](int64_t block, int64_t at) {
      depth += covers[to_size(at)];
      pairs[to_size(at)] += depth * std::min(block_n, p.num_cols - block * block_n);
    });
  }

  // visit(block column, list position) for each listed block, in order.
  template <typename Visit>
  void for_each_block(Visit&& visit) const {
    for (size_t s = 0; s < row.spans.size(); ++s) {
      for (int64_t block = row.spans[s].first; block <= row.spans[s].second; ++block) {
        visit(block, row.offset[s] + block - row.spans[s].first);
      }
    }
  }
};

}  // namespace

template <typename Index>
BsrMask<Index> intervals_to_bsr_mask(const IntervalPattern& p, int64_t block_m, int64_t block_n) {
  const char* context = "intervals_to_bsr_mask";
  internal::check_block_sizes(context, block_m, block_n);
  internal::check_shape<Index>(context, p.num_rows, p.num_cols);
  const int64_t words = blocks_along(internal::checked_mul(context, "block_m", block_m, "block_n", block_n), 64);
  const int64_t num_block_rows = blocks_along(p.num_rows, block_m);
  BsrMask<Index> mask;
  BsrPattern<Index>& out = mask.blocks;
  out.num_rows = p.num_rows;
  out.num_cols = p.num_cols;
  out.block_m = block_m;
  out.block_n = block_n;
  out.block_row_ptr.assign(to_size(num_block_rows) + 1, Index{0});

  BlockRow listed;
  const BlockSpans& row = listed.row;
  std::vector<int64_t> slot;        // per listed block: partial slot or -1
  std::vector<int64_t> partial_at;  // list positions of the partial blocks
  for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
    const int64_t r0 = block_row * block_m, r1 = r0 + std::min(block_m, p.num_rows - r0);
    listed.list(p, block_n, r0, r1);
    // The blocks in list order: full iff every in-range element attends.
    slot.assign(to_size(row.total), -1);
    const int64_t rows = r1 - r0;
    listed.for_each_block([&](int64_t block, int64_t at) {
      const int64_t cols = std::min(block_n, p.num_cols - block * block_n);
      out.block_col_idx.push_back(static_cast<Index>(block));
      const bool full = listed.pairs[to_size(at)] == rows * cols;
      mask.kind.push_back(full ? BlockKind::full : BlockKind::partial);
      if (!full) {
        slot[to_size(at)] = mask.num_partial();
        const int64_t total = internal::checked_mul(context, "num_partial", slot[to_size(at)] + 1, "words_per_block", words);
        internal::resize_checked(
            mask.partial_bits, total, context,
            [&] {
              return detail::concat("partial_bits (num_partial * words_per_block = ", slot[to_size(at)] + 1, " * ",
                                    words, " words, block_m * block_n = ", block_m, " * ", block_n, ")");
            },
            uint64_t{0});
      }
      mask.partial_slot.push_back(slot[to_size(at)]);
    });
    // The bits of the partial blocks: each interval sets its run in every partial block it reaches
    // (found among the row's partial blocks by position, never walking the full ones between).
    partial_at.clear();
    for (int64_t at = 0; at < row.total; ++at) {
      if (slot[to_size(at)] >= 0) partial_at.push_back(at);
    }
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t k = p.row_begin(r); k < p.row_end(r); ++k) {
        const int64_t lo = p.begin[to_size(k)], hi = p.end[to_size(k)];
        const int64_t first = lo / block_n, last = (hi - 1) / block_n;
        const int64_t at = row.position(first);
        for (auto it = std::lower_bound(partial_at.begin(), partial_at.end(), at);
             it != partial_at.end() && *it <= at + last - first; ++it) {
          const int64_t block = first + (*it - at);
          const int64_t c0 = std::max(lo, block * block_n) - block * block_n;
          const int64_t c1 = std::min(hi, (block + 1) * block_n) - block * block_n;
          sparse_formats::set_bit_range(mask.partial_bits.data() + slot[to_size(*it)] * words, (r - r0) * block_n + c0,
                   (r - r0) * block_n + c1);
        }
      }
    }
    out.block_row_ptr[to_size(block_row) + 1] = static_cast<Index>(out.num_blocks());
  }
  return mask;
}

// Row by row, the row's stored blocks in column order: a full block is one interval, a partial
// block its row's runs of set bits; an interval touching the row's previous one extends it.
template <typename Index>
IntervalPattern bsr_mask_to_intervals(const BsrMask<Index>& mask) {
  const BsrPattern<Index>& blocks = mask.blocks;
  const BsrPatternView<Index> view = blocks.view();
  const int64_t block_m = blocks.block_m, block_n = blocks.block_n;
  const int64_t words = mask.words_per_block();
  // One offset a row: a shape the machine cannot hold is refused here (a block mask of few blocks
  // may name any number of rows).
  IntervalPattern out(blocks.num_rows, blocks.num_cols,
                      internal::allocate<int64_t>("bsr_mask_to_intervals", "row_ptr (num_rows + 1 offsets)",
                                                  internal::saturating_plus_one(blocks.num_rows)),
                      {}, {});
  const auto add = [&out](int64_t row, int64_t lo, int64_t hi) {
    if (out.num_intervals() > out.row_begin(row) && out.end.back() == lo) {
      out.end.back() = hi;
    } else {
      out.begin.push_back(lo);
      out.end.push_back(hi);
    }
  };
  // At most one interval a row per full block (fewer where blocks touch): reserved, so the arrays
  // are written once rather than grown.
  int64_t full_rows = 0;
  for (int64_t block_row = 0; block_row < view.num_block_rows(); ++block_row) {
    const int64_t stored = static_cast<int64_t>(blocks.block_row_ptr[to_size(block_row) + 1] - blocks.block_row_ptr[to_size(block_row)]);
    full_rows += stored * view.block_rows_in(block_row);
  }
  out.begin.reserve(to_size(full_rows));
  out.end.reserve(to_size(full_rows));
  for (int64_t block_row = 0; block_row < view.num_block_rows(); ++block_row) {
    const int64_t b0 = static_cast<int64_t>(blocks.block_row_ptr[to_size(block_row)]);
    const int64_t b1 = static_cast<int64_t>(blocks.block_row_ptr[to_size(block_row) + 1]);
    for (int64_t r = 0; r < view.block_rows_in(block_row); ++r) {
      const int64_t row = block_row * block_m + r;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t block_col = static_cast<int64_t>(blocks.block_col_idx[to_size(b)]);
        const int64_t c0 = block_col * block_n, cols = view.block_cols_in(block_col);
        if (mask.kind[to_size(b)] == BlockKind::full) {
          add(row, c0, c0 + cols);
          continue;
        }
        const uint64_t* bits = mask.partial_bits.data() + mask.partial_slot[to_size(b)] * words;
        for (int64_t c = 0; c < cols;) {
          const int64_t bit = r * block_n + c;
          if (((bits[bit / 64] >> (bit % 64)) & 1u) == 0) {
            ++c;
            continue;
          }
          int64_t stop = c + 1;
          for (; stop < cols; ++stop) {
            const int64_t next = r * block_n + stop;
            if (((bits[next / 64] >> (next % 64)) & 1u) == 0) break;
          }
          add(row, c0 + c, c0 + stop);
          c = stop;
        }
      }
      out.row_ptr[to_size(row) + 1] = out.num_intervals();
    }
  }
  return out;
}

MaskStats mask_stats(const IntervalPattern& p, int64_t block_m, int64_t block_n) {
  internal::check_block_sizes("mask_stats", block_m, block_n);
  MaskStats stats;
  stats.num_rows = p.num_rows;
  stats.num_cols = p.num_cols;
  stats.block_m = block_m;
  stats.block_n = block_n;
  for (int64_t row = 0; row < p.num_rows; ++row) {
    int64_t length = 0;
    for (int64_t k = p.row_begin(row); k < p.row_end(row); ++k) length += p.end[to_size(k)] - p.begin[to_size(k)];
    stats.nnz += length;
    stats.empty_rows += length == 0 ? 1 : 0;
    stats.max_row_length = std::max(stats.max_row_length, length);
  }
  BlockRow listed;
  const int64_t num_block_rows = blocks_along(p.num_rows, block_m);
  for (int64_t block_row = 0; block_row < num_block_rows; ++block_row) {
    const int64_t r0 = block_row * block_m, r1 = r0 + std::min(block_m, p.num_rows - r0);
    listed.list(p, block_n, r0, r1);
    stats.empty_block_rows += listed.row.total == 0 ? 1 : 0;
    listed.for_each_block([&](int64_t block, int64_t at) {
      const bool full = listed.pairs[to_size(at)] == (r1 - r0) * std::min(block_n, p.num_cols - block * block_n);
      ++(full ? stats.full_blocks : stats.partial_blocks);
    });
  }
  stats.stored_blocks = stats.full_blocks + stats.partial_blocks;
  const double area = static_cast<double>(p.num_rows) * static_cast<double>(p.num_cols);
  stats.density = area > 0.0 ? static_cast<double>(stats.nnz) / area : 0.0;
  const double grid = static_cast<double>(num_block_rows) * static_cast<double>(blocks_along(p.num_cols, block_n));
  stats.block_density = grid > 0.0 ? static_cast<double>(stats.stored_blocks) / grid : 0.0;
  return stats;
}

template IntervalPattern bsr_mask_to_intervals<int32_t>(const BsrMask<int32_t>&);
template IntervalPattern bsr_mask_to_intervals<int64_t>(const BsrMask<int64_t>&);
template BsrMask<int32_t> intervals_to_bsr_mask<int32_t>(const IntervalPattern&, int64_t, int64_t);
template BsrMask<int64_t> intervals_to_bsr_mask<int64_t>(const IntervalPattern&, int64_t, int64_t);

}  // namespace sparse_formats
