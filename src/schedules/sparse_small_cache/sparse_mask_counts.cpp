// A mask's counts for the sparse small-cache tile choice and predictions, from its CSR alone
// (sparse_mask_counts.hpp).
#include "schedules/sparse_small_cache/sparse_mask_counts.hpp"

#include <algorithm>
#include <utility>

namespace spattn::schedules {

// One pass over the rows, run by run: the runs are kept until there are more than nnz / 4 of them
// (then the mask is unstructured and the counts walk the entries); the keys with an entry are
// counted from the runs' coverage (+1 at a run's first key, -1 past its last).
SparseMaskCounts::SparseMaskCounts(const sparse_formats::CsrPatternView<int64_t>& csr)
    : seqlen_q_(csr.num_rows), seqlen_k_(csr.num_cols), row_ptr_(csr.row_ptr), col_idx_(csr.col_idx) {
  count_runs(csr);
}

SparseMaskCounts::SparseMaskCounts(const sparse_formats::CsrPatternView<int32_t>& csr)
    : seqlen_q_(csr.num_rows), seqlen_k_(csr.num_cols), col_idx32_(csr.col_idx) {
  positions_.assign(csr.row_ptr, csr.row_ptr + std::max<int64_t>(csr.num_rows, 0) + 1);
  row_ptr_ = positions_.data();
  count_runs(csr);
}

template <typename Index>
void SparseMaskCounts::count_runs(const sparse_formats::CsrPatternView<Index>& csr) {
  const int64_t m = std::max<int64_t>(csr.num_rows, 0), n = std::max<int64_t>(csr.num_cols, 0);
  nnz_ = csr.nnz();
  const auto max_runs = static_cast<size_t>(nnz_ / 4);
  bool keep_runs = true;
  run_ptr_.reserve(static_cast<size_t>(m + 1));
  run_ptr_.push_back(0);
  std::vector<int64_t> coverage(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t end = csr.row_ptr[i + 1];
    if (csr.row_ptr[i] < end) ++nonempty_rows_;
    for (int64_t p = csr.row_ptr[i]; p < end;) {
      const int64_t first = csr.col_idx[p];
      int64_t last = first;
      for (++p; p < end && csr.col_idx[p] == last + 1; ++p) ++last;
      ++coverage[static_cast<size_t>(first)];
      --coverage[static_cast<size_t>(last + 1)];
      if (keep_runs && run_begin_.size() == max_runs) keep_runs = false;
      if (keep_runs) {
        run_begin_.push_back(first);
        run_end_.push_back(last + 1);
      }
    }
    if (keep_runs) run_ptr_.push_back(static_cast<int64_t>(run_begin_.size()));
  }
  int64_t depth = 0;
  for (int64_t j = 0; j < n; ++j) {
    depth += coverage[static_cast<size_t>(j)];
    if (depth > 0) ++nonempty_cols_;
  }
  if (!keep_runs) {
    for (auto* runs : {&run_ptr_, &run_begin_, &run_end_}) std::vector<int64_t>().swap(*runs);
  } else {
    mark_repeated_rows();
  }
}

// The intervals are the runs (touching ones are merged, as the CSR walk above merges them); the
// positions are their lengths' prefix sums.
SparseMaskCounts::SparseMaskCounts(const sparse_formats::IntervalPattern& intervals)
    : seqlen_q_(intervals.num_rows), seqlen_k_(intervals.num_cols) {
  const int64_t m = std::max<int64_t>(seqlen_q_, 0), n = std::max<int64_t>(seqlen_k_, 0);
  positions_.assign(static_cast<size_t>(m + 1), 0);
  run_ptr_.assign(1, 0);
  run_ptr_.reserve(static_cast<size_t>(m + 1));
  run_begin_.reserve(static_cast<size_t>(intervals.num_intervals()));
  run_end_.reserve(static_cast<size_t>(intervals.num_intervals()));
  std::vector<int64_t> coverage(static_cast<size_t>(n + 1), 0);
  for (int64_t i = 0; i < m; ++i) {
    int64_t length = 0;
    for (int64_t k = intervals.row_begin(i); k < intervals.row_end(i); ++k) {
      const int64_t begin = intervals.begin[static_cast<size_t>(k)], end = intervals.end[static_cast<size_t>(k)];
      length += end - begin;
      if (!run_end_.empty() && run_ptr_.back() < static_cast<int64_t>(run_end_.size()) && run_end_.back() == begin) {
        run_end_.back() = end;  // touching intervals of one row: one run
      } else {
        run_begin_.push_back(begin);
        run_end_.push_back(end);
      }
      ++coverage[static_cast<size_t>(begin)];
      --coverage[static_cast<size_t>(end)];
    }
    if (length > 0) ++nonempty_rows_;
    positions_[static_cast<size_t>(i) + 1] = positions_[static_cast<size_t>(i)] + length;
    run_ptr_.push_back(static_cast<int64_t>(run_begin_.size()));
  }
  nnz_ = positions_.back();
  row_ptr_ = positions_.data();
  mark_repeated_rows();
  int64_t depth = 0;
  for (int64_t j = 0; j < n; ++j) {
    depth += coverage[static_cast<size_t>(j)];
    if (depth > 0) ++nonempty_cols_;
  }
}

template <typename Key, typename Value, typename Count>
Value SparseMaskCounts::remembered(std::map<Key, Value>& memo, Key key, Count&& count) const {
  {
    std::lock_guard<std::mutex> lock(memo_mutex_);
    const auto found = memo.find(key);
    if (found != memo.end()) return found->second;
  }
  const Value value = count(key);  // (a race counts the same key twice, with the same result)
  std::lock_guard<std::mutex> lock(memo_mutex_);
  memo.emplace(key, value);
  return value;
}

int64_t SparseMaskCounts::touched_keys(int64_t block_rows) const {
  return remembered(touched_keys_memo_, std::max<int64_t>(block_rows, 1),
                    [this](int64_t block) { return count_touched_keys(block); });
}

int64_t SparseMaskCounts::touched_queries(int64_t block_cols) const {
  return remembered(touched_queries_memo_, std::max<int64_t>(block_cols, 1),
                    [this](int64_t block) { return count_touched_queries(block); });
}

namespace {

// Sum over the nonempty rows of a compressed structure of the run-aligned pieces their positions
// [ptr[i], ptr[i + 1]) fall in.
int64_t runs_of(const int64_t* ptr, int64_t rows, int64_t run) {
  int64_t runs = 0;
  for (int64_t i = 0; i < rows; ++i) {
    if (ptr[i] < ptr[i + 1]) runs += (ptr[i + 1] + run - 1) / run - ptr[i] / run;
  }
  return runs;
}

}  // namespace

int64_t SparseMaskCounts::entry_runs(int64_t run, bool transposed) const {
  run = std::max<int64_t>(run, 1);
  if (run == 1) return nnz_;
  if (!transposed) {
    return remembered(row_runs_memo_, run, [this](int64_t r) {
      return runs_of(row_ptr_, std::max<int64_t>(seqlen_q_, 0), r);
    });
  }
  return remembered(key_runs_memo_, run, [this](int64_t r) {
    const int64_t n = std::max<int64_t>(seqlen_k_, 0);
    std::vector<int64_t> col_ptr(static_cast<size_t>(n + 1), 0);
    if (has_columns()) {
      with_columns([&](const auto* columns) {
        for (int64_t p = 0; p < nnz_; ++p) ++col_ptr[static_cast<size_t>(columns[p] + 1)];
      });
    } else {  // the keys' counts from the runs: +1 from a run's first key to its last, summed below
      std::vector<int64_t> difference(static_cast<size_t>(n + 1), 0);
      for (size_t k = 0; k < run_begin_.size(); ++k) {
        ++difference[static_cast<size_t>(run_begin_[k])];
        --difference[static_cast<size_t>(run_end_[k])];
      }
      for (int64_t j = 0, depth = 0; j < n; ++j) col_ptr[static_cast<size_t>(j + 1)] = depth += difference[static_cast<size_t>(j)];
    }
    for (int64_t j = 0; j < n; ++j) col_ptr[static_cast<size_t>(j + 1)] += col_ptr[static_cast<size_t>(j)];
    return runs_of(col_ptr.data(), n, r);
  });
}

int64_t SparseMaskCounts::count_touched_keys(int64_t block_rows) const {
  if (block_rows == 1) return nnz_;  // a row's keys are distinct
  return uses_runs() ? touched_keys_by_runs(block_rows) : touched_keys_by_entries(block_rows);
}

// last[c] = the last row block that counted key c.
int64_t SparseMaskCounts::touched_keys_by_entries(int64_t block_rows) const {
  const int64_t m = seqlen_q_;
  std::vector<int64_t> last(static_cast<size_t>(std::max<int64_t>(seqlen_k_, 0)), -1);
  int64_t touched = 0;
  with_columns([&](const auto* columns) {
    for (int64_t row0 = 0, b = 0; row0 < m; row0 += block_rows, ++b) {
      const int64_t end = row_ptr_[std::min(row0 + block_rows, m)];
      for (int64_t p = row_ptr_[row0]; p < end; ++p) {
        int64_t& seen = last[static_cast<size_t>(columns[p])];
        if (seen != b) {
          seen = b;
          ++touched;
        }
      }
    }
  });
  return touched;
}

// Whether rows a and b have the same runs.
bool SparseMaskCounts::same_runs(int64_t a, int64_t b) const {
  const auto ra = static_cast<size_t>(run_ptr_[static_cast<size_t>(a)]);
  const auto rb = static_cast<size_t>(run_ptr_[static_cast<size_t>(b)]);
  const auto count = static_cast<size_t>(run_ptr_[static_cast<size_t>(a) + 1]) - ra;
  if (count != static_cast<size_t>(run_ptr_[static_cast<size_t>(b) + 1]) - rb) return false;
  return std::equal(run_begin_.begin() + static_cast<std::ptrdiff_t>(ra), run_begin_.begin() + static_cast<std::ptrdiff_t>(ra + count),
                    run_begin_.begin() + static_cast<std::ptrdiff_t>(rb)) &&
         std::equal(run_end_.begin() + static_cast<std::ptrdiff_t>(ra), run_end_.begin() + static_cast<std::ptrdiff_t>(ra + count),
                    run_end_.begin() + static_cast<std::ptrdiff_t>(rb));
}

void SparseMaskCounts::mark_repeated_rows() {
  const int64_t m = std::max<int64_t>(seqlen_q_, 0);
  repeats_previous_.assign(static_cast<size_t>(m), 0);
  for (int64_t i = 1; i < m; ++i) repeats_previous_[static_cast<size_t>(i)] = same_runs(i, i - 1) ? 1 : 0;
}

// Per row block, the size of the union of its rows' runs: a row with the runs of the row before it
// adds nothing (the rows of one block of a block mask, of a document, of a prefix), so a block of
// such rows touches its first row's entries; the rest are sorted by first key (they usually are
// already: windows move right row by row), then merged.
int64_t SparseMaskCounts::touched_keys_by_runs(int64_t block_rows) const {
  const int64_t m = seqlen_q_;
  std::vector<std::pair<int64_t, int64_t>> block;
  int64_t touched = 0;
  const char* repeats = repeats_previous_.data();
  for (int64_t row0 = 0; row0 < m; row0 += block_rows) {
    const int64_t row_end = std::min(row0 + block_rows, m);
    if (std::find(repeats + row0 + 1, repeats + row_end, char{0}) == repeats + row_end) {
      touched += row_ptr_[row0 + 1] - row_ptr_[row0];  // every row has row0's runs: disjoint, so its entries
      continue;
    }
    block.clear();
    for (int64_t row = row0; row < row_end; ++row) {
      if (row > row0 && repeats_previous_[static_cast<size_t>(row)]) continue;
      for (int64_t r = run_ptr_[static_cast<size_t>(row)]; r < run_ptr_[static_cast<size_t>(row) + 1]; ++r) {
        block.emplace_back(run_begin_[static_cast<size_t>(r)], run_end_[static_cast<size_t>(r)]);
      }
    }
    if (!std::is_sorted(block.begin(), block.end())) std::sort(block.begin(), block.end());
    int64_t covered_to = -1;  // keys below this are counted
    for (const auto& [begin, end] : block) {
      const int64_t from = std::max(begin, covered_to);
      if (end > from) touched += end - from;
      covered_to = std::max(covered_to, end);
    }
  }
  return touched;
}

// Per query row, the distinct blocks of block_cols keys its entries fall in. From the runs: a run
// [begin, end) reaches the blocks begin / block_cols .. (end - 1) / block_cols, the row's runs
// ascend, so only a run's first block can be the previous run's last (O(runs)). Else a row's
// entries visit its blocks in increasing order.
int64_t SparseMaskCounts::count_touched_queries(int64_t block_cols) const {
  if (block_cols == 1) return nnz_;  // a key's query rows are distinct
  if (uses_runs()) {
    int64_t touched = 0, row_touched = 0;
    for (int64_t i = 0; i < std::max<int64_t>(seqlen_q_, 0); ++i) {
      if (!repeats_previous_[static_cast<size_t>(i)]) {  // (a repeated row touches what the one before did)
        row_touched = 0;
        int64_t previous_last = -1;
        for (int64_t r = run_ptr_[static_cast<size_t>(i)]; r < run_ptr_[static_cast<size_t>(i + 1)]; ++r) {
          const int64_t first = run_begin_[static_cast<size_t>(r)] / block_cols;
          const int64_t last = (run_end_[static_cast<size_t>(r)] - 1) / block_cols;
          row_touched += last - first + 1 - (first == previous_last ? 1 : 0);
          previous_last = last;
        }
      }
      touched += row_touched;
    }
    return touched;
  }
  int64_t touched = 0;
  with_columns([&](const auto* columns) {
    for (int64_t i = 0; i < std::max<int64_t>(seqlen_q_, 0); ++i) {
      int64_t last_block = -1;
      for (int64_t p = row_ptr_[i]; p < row_ptr_[i + 1]; ++p) {
        const int64_t block = columns[p] / block_cols;
        if (block != last_block) ++touched;
        last_block = block;
      }
    }
  });
  return touched;
}

}  // namespace spattn::schedules
