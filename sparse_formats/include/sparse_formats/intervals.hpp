// Masks as key intervals: for each query row, a short sorted list of [begin, end) key ranges.
//
// Causal, sliding windows, packed documents, prefix-LM, global tokens and their compositions are a
// few ranges per row, so this form holds them in O(rows + intervals) words where CSR holds every
// attended pair: causal at n = 2^20 is 24 MiB here (one interval per row: one row offset and two
// bounds, 8 bytes each) and 4 TiB as int64 CSR. Nothing here knows about attention.
//
// Invariants (checked by validate(), assumed everywhere else):
//   row_ptr has num_rows + 1 entries, row_ptr[0] == 0, row_ptr never decreases,
//   row_ptr[num_rows] == begin.size() == end.size(); within a row every interval is non-empty and
//   lies in [0, num_cols) (0 <= begin < end <= num_cols), and intervals ascend without overlapping
//   (end[k] <= begin[k + 1]). The builders here also merge touching intervals (end[k] < begin[k + 1]),
//   the canonical form; validate() accepts touching ones, which describe the same pairs.
#pragma once

#include <sparse_formats/bsr.hpp>
#include <sparse_formats/convert.hpp>
#include <sparse_formats/csr.hpp>
#include <sparse_formats/patterns.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sparse_formats {

struct IntervalPattern {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  std::vector<int64_t> row_ptr{0};  // (num_rows + 1): row i's intervals are [row_ptr[i], row_ptr[i + 1])
  std::vector<int64_t> begin;       // (num_intervals): first key of each interval
  std::vector<int64_t> end;         // (num_intervals): one past its last key

  IntervalPattern() = default;
  IntervalPattern(int64_t rows, int64_t cols, std::vector<int64_t> ptr, std::vector<int64_t> first,
                  std::vector<int64_t> last)
      : num_rows(rows), num_cols(cols), row_ptr(std::move(ptr)), begin(std::move(first)), end(std::move(last)) {}
  // An all-empty rows x cols pattern (rows >= 0).
  static IntervalPattern empty(int64_t rows, int64_t cols) {
    return IntervalPattern(rows, cols, std::vector<int64_t>(static_cast<std::size_t>(rows) + 1, 0), {}, {});
  }

  int64_t num_intervals() const { return static_cast<int64_t>(begin.size()); }
  int64_t row_begin(int64_t row) const { return row_ptr[static_cast<std::size_t>(row)]; }
  int64_t row_end(int64_t row) const { return row_ptr[static_cast<std::size_t>(row) + 1]; }
  // Attended pairs: the summed interval lengths, O(intervals).
  int64_t nnz() const;
  // The bytes of the three arrays (8 per row offset, 16 per interval).
  int64_t memory_bytes() const {
    return 8 * (static_cast<int64_t>(row_ptr.size()) + 2 * num_intervals());
  }
};

// Checks the invariants above; throws FormatError naming `what`, the row, the interval and the
// values ("mask: row 3, interval 1 = [5, 4) is empty").
void validate(const IntervalPattern& pattern, const std::string& what = "intervals");

// Every attended pair as CSR, rows in order. Refused before anything is allocated when nnz does not
// fit Index ("use the int64_t variant") or the machine's memory (the arrays' bytes are named).
template <typename Index>
CsrPattern<Index> intervals_to_csr(const IntervalPattern& pattern);

// The maximal runs of consecutive keys of each CSR row (the canonical interval form). O(nnz).
template <typename Index>
IntervalPattern csr_to_intervals(const CsrPatternView<Index>& pattern);

// The blocks (block_m x block_n) holding an attended pair, full or partial with the element bits:
// equal to csr_to_bsr_mask(intervals_to_csr(pattern), block_m, block_n), built in
// O(intervals x log + stored blocks + partial blocks' bits), never touching the pairs one by one.
template <typename Index>
BsrMask<Index> intervals_to_bsr_mask(const IntervalPattern& pattern, int64_t block_m, int64_t block_n);

// The rows of a valid block mask (validate(BsrMask)) as intervals: a full block gives each of its
// rows one interval, a partial block each row's runs of set bits; canonical (touching runs merged).
// O(stored blocks x block_m + partial blocks' bits).
template <typename Index>
IntervalPattern bsr_mask_to_intervals(const BsrMask<Index>& mask);

// The transpose (num_cols x num_rows): for each key, the runs of query rows attending it. A sweep
// over the keys with the attending rows kept as runs: O(intervals x log + output intervals), never
// O(nnz). Canonical.
IntervalPattern transpose(const IntervalPattern& pattern);

// Union and intersection of two patterns of the same shape (else FormatError naming both shapes),
// row by row in O(intervals(a) + intervals(b)); the result is canonical.
IntervalPattern interval_union(const IntervalPattern& a, const IntervalPattern& b);
IntervalPattern interval_intersection(const IntervalPattern& a, const IntervalPattern& b);

// mask_stats (convert.hpp) of an interval mask blocked at block_m x block_n, by interval
// arithmetic: equal to mask_stats(intervals_to_bsr_mask(...)) without building the blocks.
// O(intervals x log + listed blocks).
MaskStats mask_stats(const IntervalPattern& mask, int64_t block_m, int64_t block_n);

// render_mask_blocks (patterns.hpp) of an interval mask: the same picture as of its pairs, in
// O(intervals + picture).
std::string render_mask_blocks(const IntervalPattern& mask, int64_t max_width = 64);

// The spec's mask in interval form, when that is the form it should live in: every leaf is a
// pattern of key ranges (full, causal, sliding and global windows, documents, prefix_lm, bigbird,
// random_blocks), or of residue classes (dilated_window, strided, fixed) whose rows average at
// least kMinMeanIntervalLength keys per interval, and compositions of such leaves. std::nullopt
// otherwise (random; dilated windows and strided patterns of short runs: their pairs are the
// cheaper description; make_pattern builds them). Checks the
// spec and its values as make_pattern does, and refuses before allocating when the intervals do
// not fit the machine's memory. O(rows + intervals) per leaf.
std::optional<IntervalPattern> make_interval_pattern(const PatternSpec& spec, int64_t seqlen_q,
                                                     int64_t seqlen_k);
inline constexpr int64_t kMinMeanIntervalLength = 4;

}  // namespace sparse_formats
