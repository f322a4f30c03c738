// What the density-adaptive small-cache schedule's tile choice and exact predictions read from a
// mask (sparse_small_cache.hpp), computed from its CSR alone: no copy and no transpose. The
// planner prices small_cache with this, so that planning never builds the schedule's
// SparseSmallCacheMask (a CSR copy, its transpose and per-entry positions: 3 nnz int64 words);
// that is built only when small_cache runs.
//
// The distinct-column counts (touched_keys, touched_queries) walk the entries, O(nnz) each, or,
// when the rows are made of few runs of consecutive keys (windows, blocks, documents: at most
// nnz / 4 runs), the runs, stored once: O(runs) per count. Memory: O(seqlen_k) scratch per count,
// plus 2 runs + seqlen_q + 1 words when runs are kept.
#pragma once

#include <sparse_formats/csr.hpp>
#include <sparse_formats/intervals.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace spattn::schedules {

class SparseMaskCounts {
 public:
  // `csr` must be a valid pattern (sparse_formats::validate: columns in range, strictly increasing
  // in each row) and outlive this object. O(nnz + seqlen_q + seqlen_k).
  // An int32 pattern's row pointers are copied (O(seqlen_q)); its columns are read where they lie.
  explicit SparseMaskCounts(const sparse_formats::CsrPatternView<int32_t>& csr);
  explicit SparseMaskCounts(const sparse_formats::CsrPatternView<int64_t>& csr);
  // The same counts from an interval mask (valid: sparse_formats::validate), whose intervals are
  // the runs: O(seqlen_q + intervals) words (the CSR positions of the rows and a copy of the
  // intervals), never O(nnz); the counts walk the runs.
  explicit SparseMaskCounts(const sparse_formats::IntervalPattern& intervals);

  int64_t seqlen_q() const { return seqlen_q_; }
  int64_t seqlen_k() const { return seqlen_k_; }
  int64_t nnz() const { return nnz_; }
  int64_t nonempty_rows() const { return nonempty_rows_; }  // query rows with an entry
  int64_t nonempty_cols() const { return nonempty_cols_; }  // keys with an entry
  bool uses_runs() const { return !run_ptr_.empty(); }

  // Sum over blocks of `block_rows` consecutive query rows of the distinct keys their entries
  // touch, and over blocks of `block_cols` consecutive keys of the distinct query rows touching
  // them (= sum over query rows of the distinct key blocks their entries fall in). Equal to
  // SparseSmallCacheMask's counts of the same name. Each count is remembered (the tile choice,
  // the prediction and the work estimate ask for the same block sizes; a count walks the entries
  // or the runs): thread-safe, the object is shared by a Mask's planners.
  int64_t touched_keys(int64_t block_rows) const;
  int64_t touched_queries(int64_t block_cols) const;

  // The runs the entries move in when each row's (transposed: each key's) entries are cut at
  // multiples of `run` positions of its compressed arrays: sum over nonempty rows of
  // ceil(end / run) - floor(begin / run), [begin, end) the row's positions (nnz when run = 1).
  // Remembered like the touched counts; O(seqlen_q), transposed O(nnz + seqlen_k).
  int64_t entry_runs(int64_t run, bool transposed) const;

  // What the transposed sweeps (dK, dV) gather from a value array in CSR order: over blocks of
  // `block_keys` consecutive keys, the pieces of `run` positions (cut at multiples of run) that
  // hold a block's entries, each loaded whole once per walk (the walk meets a block's entries in
  // CSR order: query by query, then key by key), and the words they carry (a piece is clipped at
  // nnz). {nnz, nnz} when run = 1. Remembered like the touched counts, every power of two up to
  // a line of 16 counted at once; O(runs x 16 + seqlen_q) from the runs, else
  // O(segments + seqlen_q + seqlen_k / block_keys), a segment being a query row's consecutive
  // entries in one key block (at most nnz of them).
  struct Gathers {
    int64_t loads = 0;
    int64_t words = 0;
  };
  Gathers gathers(int64_t block_keys, int64_t run) const;

 private:
  int64_t count_touched_keys(int64_t block_rows) const;
  int64_t count_touched_queries(int64_t block_cols) const;
  int64_t touched_keys_by_entries(int64_t block_rows) const;
  int64_t touched_keys_by_runs(int64_t block_rows) const;
  bool same_runs(int64_t a, int64_t b) const;
  void mark_repeated_rows();  // fills repeats_previous_ from the runs
  // get(block) from memo, computing it with count(block) outside the lock the first time.
  template <typename Key, typename Value, typename Count>
  Value remembered(std::map<Key, Value>& memo, Key key, Count&& count) const;
  // Gathers for each of `runs` with one walk (sparse_mask_gathers.cpp): of the entries' segments,
  // or of the runs (uses_runs()).
  std::vector<Gathers> count_gathers_by_entries(int64_t block_keys, const std::vector<int64_t>& runs) const;
  std::vector<Gathers> count_gathers_by_runs(int64_t block_keys, const std::vector<int64_t>& runs) const;
  template <typename Index>
  void count_runs(const sparse_formats::CsrPatternView<Index>& csr);
  // f(columns) over the CSR's column array, whichever its index type (with_columns: only for a
  // CSR-built object, has_columns()).
  bool has_columns() const { return col_idx_ != nullptr || col_idx32_ != nullptr; }
  template <typename F>
  auto with_columns(F&& f) const {
    return col_idx32_ != nullptr ? f(col_idx32_) : f(col_idx_);
  }
  static constexpr int64_t kGatherRuns = 16;  // the runs counted together (powers of two, to a line)

  mutable std::mutex memo_mutex_;
  mutable std::map<int64_t, int64_t> touched_keys_memo_, touched_queries_memo_;
  mutable std::map<int64_t, int64_t> row_runs_memo_, key_runs_memo_;
  mutable std::map<std::pair<int64_t, int64_t>, Gathers> gathers_memo_;

  int64_t seqlen_q_ = 0;
  int64_t seqlen_k_ = 0;
  // (seqlen_q + 1): the CSR position where each row's entries start: an int64 CSR's own row_ptr,
  // or `positions_` (an int32 CSR's row_ptr widened, or built from the intervals).
  const int64_t* row_ptr_ = nullptr;
  std::vector<int64_t> positions_;
  const int64_t* col_idx_ = nullptr;    // (nnz): an int64 CSR's columns; nullptr for intervals
  const int32_t* col_idx32_ = nullptr;  // (nnz): an int32 CSR's columns
  int64_t nnz_ = 0;
  int64_t nonempty_rows_ = 0;
  int64_t nonempty_cols_ = 0;
  // Runs of consecutive keys, row by row: run r covers keys [run_begin[r], run_end[r]).
  std::vector<int64_t> run_ptr_;  // (seqlen_q + 1), empty when the runs are not kept
  std::vector<int64_t> run_begin_, run_end_;
  std::vector<char> repeats_previous_;  // (seqlen_q) when runs are kept: row i has row i - 1's runs
};

}  // namespace spattn::schedules
