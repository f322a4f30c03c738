// Interval masks (intervals.hpp): checks, the conversions to and from CSR, union and intersection.
#include <sparse_formats/intervals.hpp>

#include <sparse_formats/error.hpp>

#include "format_internal.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <utility>

namespace sparse_formats {

using internal::to_size;

int64_t IntervalPattern::nnz() const {
  int64_t total = 0;
  for (int64_t k = 0; k < num_intervals(); ++k) total += end[to_size(k)] - begin[to_size(k)];
  return total;
}

void validate(const IntervalPattern& p, const std::string& what) {
  if (p.num_rows < 0 || p.num_cols < 0) {
    fail(what, ": shape ", p.num_rows, " x ", p.num_cols, " must be >= 0 in both extents");
  }
  if (p.row_ptr.size() != to_size(p.num_rows) + 1) {
    fail(what, ": row_ptr has ", p.row_ptr.size(), " entries, expected num_rows + 1 = ", p.num_rows + 1);
  }
  if (p.begin.size() != p.end.size()) {
    fail(what, ": begin has ", p.begin.size(), " entries but end has ", p.end.size());
  }
  if (p.row_ptr[0] != 0) fail(what, ": row_ptr[0] = ", p.row_ptr[0], " must be 0");
  for (int64_t i = 0; i < p.num_rows; ++i) {
    if (p.row_ptr[to_size(i) + 1] < p.row_ptr[to_size(i)]) {
      fail(what, ": row_ptr[", i + 1, "] = ", p.row_ptr[to_size(i) + 1], " < row_ptr[", i, "] = ",
           p.row_ptr[to_size(i)], " (row_ptr must not decrease)");
    }
  }
  if (p.row_ptr.back() != p.num_intervals()) {
    fail(what, ": row_ptr[", p.num_rows, "] = ", p.row_ptr.back(), " but there are ", p.num_intervals(),
         " intervals");
  }
  for (int64_t i = 0; i < p.num_rows; ++i) {
    for (int64_t k = p.row_begin(i); k < p.row_end(i); ++k) {
      const int64_t lo = p.begin[to_size(k)], hi = p.end[to_size(k)];
      if (lo < 0 || hi > p.num_cols || lo >= hi) {
        fail(what, ": row ", i, ", interval ", k - p.row_begin(i), " = [", lo, ", ", hi,
             ") must satisfy 0 <= begin < end <= num_cols = ", p.num_cols);
      }
      if (k > p.row_begin(i) && lo < p.end[to_size(k) - 1]) {
        fail(what, ": row ", i, ", interval ", k - p.row_begin(i), " = [", lo, ", ", hi,
             ") starts before the previous one [", p.begin[to_size(k) - 1], ", ", p.end[to_size(k) - 1],
             ") ends (intervals must ascend without overlapping)");
      }
    }
  }
}

template <typename Index>
CsrPattern<Index> intervals_to_csr(const IntervalPattern& p) {
  const char* context = "intervals_to_csr";
  internal::check_shape<int64_t>(context, p.num_rows, p.num_cols);
  const int64_t nnz = p.nnz();
  if (nnz > internal::index_max<Index>()) {
    fail(context, ": nnz = ", nnz, " exceeds the ", sizeof(Index) * 8, "-bit index type's maximum ",
         internal::index_max<Index>(), "; use the int64_t variant");
  }
  std::vector<Index> row_ptr = internal::allocate<Index>(
      context, [&] { return "row_ptr (num_rows + 1 = " + std::to_string(p.num_rows + 1) + " offsets)"; },
      p.num_rows + 1);
  std::vector<Index> col_idx = internal::allocate<Index>(
      context, [&] { return "col_idx (nnz = " + std::to_string(nnz) + " attended pairs)"; }, nnz);
  int64_t out = 0;
  for (int64_t i = 0; i < p.num_rows; ++i) {
    for (int64_t k = p.row_begin(i); k < p.row_end(i); ++k) {
      for (int64_t j = p.begin[to_size(k)]; j < p.end[to_size(k)]; ++j) col_idx[to_size(out++)] = static_cast<Index>(j);
    }
    row_ptr[to_size(i) + 1] = static_cast<Index>(out);
  }
  return CsrPattern<Index>(p.num_rows, p.num_cols, std::move(row_ptr), std::move(col_idx));
}

template <typename Index>
IntervalPattern csr_to_intervals(const CsrPatternView<Index>& csr) {
  IntervalPattern out = IntervalPattern::empty(csr.num_rows, csr.num_cols);
  for (int64_t i = 0; i < csr.num_rows; ++i) {
    for (int64_t p = csr.row_begin(i); p < csr.row_end(i);) {
      const int64_t first = csr.col_idx[p];
      int64_t last = first;
      for (++p; p < csr.row_end(i) && csr.col_idx[p] == last + 1; ++p) ++last;
      out.begin.push_back(first);
      out.end.push_back(last + 1);
    }
    out.row_ptr[to_size(i) + 1] = out.num_intervals();
  }
  return out;
}

namespace {

void check_same_shape(const char* op, const IntervalPattern& a, const IntervalPattern& b) {
  if (a.num_rows != b.num_rows || a.num_cols != b.num_cols) {
    fail(op, ": shapes differ: a is ", a.num_rows, " x ", a.num_cols, ", b is ", b.num_rows, " x ",
         b.num_cols);
  }
}

// Appends [lo, hi) to the row being built, merging it into the last interval when they touch
// (`row_first` is where the row's intervals start).
void append_merged(IntervalPattern& out, int64_t row_first, int64_t lo, int64_t hi) {
  if (lo >= hi) return;
  if (out.num_intervals() > row_first && out.end.back() >= lo) {
    out.end.back() = std::max(out.end.back(), hi);
    return;
  }
  out.begin.push_back(lo);
  out.end.push_back(hi);
}

}  // namespace

IntervalPattern interval_union(const IntervalPattern& a, const IntervalPattern& b) {
  check_same_shape("interval_union", a, b);
  IntervalPattern out = IntervalPattern::empty(a.num_rows, a.num_cols);
  for (int64_t i = 0; i < a.num_rows; ++i) {
    const int64_t row_first = out.num_intervals();
    int64_t pa = a.row_begin(i), pb = b.row_begin(i);
    while (pa < a.row_end(i) || pb < b.row_end(i)) {  // in order of begin
      const bool take_a = pb == b.row_end(i) || (pa < a.row_end(i) && a.begin[to_size(pa)] <= b.begin[to_size(pb)]);
      const IntervalPattern& from = take_a ? a : b;
      int64_t& p = take_a ? pa : pb;
      append_merged(out, row_first, from.begin[to_size(p)], from.end[to_size(p)]);
      ++p;
    }
    out.row_ptr[to_size(i) + 1] = out.num_intervals();
  }
  return out;
}

IntervalPattern interval_intersection(const IntervalPattern& a, const IntervalPattern& b) {
  check_same_shape("interval_intersection", a, b);
  IntervalPattern out = IntervalPattern::empty(a.num_rows, a.num_cols);
  for (int64_t i = 0; i < a.num_rows; ++i) {
    const int64_t row_first = out.num_intervals();
    int64_t pa = a.row_begin(i), pb = b.row_begin(i);
    while (pa < a.row_end(i) && pb < b.row_end(i)) {
      const int64_t lo = std::max(a.begin[to_size(pa)], b.begin[to_size(pb)]);
      const int64_t hi = std::min(a.end[to_size(pa)], b.end[to_size(pb)]);
      append_merged(out, row_first, lo, hi);
      if (a.end[to_size(pa)] < b.end[to_size(pb)]) {
        ++pa;
      } else {
        ++pb;
      }
    }
    out.row_ptr[to_size(i) + 1] = out.num_intervals();
  }
  return out;
}

IntervalPattern transpose(const IntervalPattern& p) {
  // Row i enters the keys' attending set at each of its intervals' begin and leaves at its end.
  struct Event {
    int64_t key, row;
    bool operator<(const Event& o) const { return key < o.key || (key == o.key && row < o.row); }
  };
  std::vector<Event> enter, leave;
  enter.reserve(to_size(p.num_intervals()));
  leave.reserve(to_size(p.num_intervals()));
  for (int64_t i = 0; i < p.num_rows; ++i) {
    for (int64_t k = p.row_begin(i); k < p.row_end(i); ++k) {
      enter.push_back({p.begin[to_size(k)], i});
      leave.push_back({p.end[to_size(k)], i});
    }
  }
  std::sort(enter.begin(), enter.end());
  std::sort(leave.begin(), leave.end());
  std::map<int64_t, int64_t> active;  // the attending rows as runs: first row -> one past the last
  const auto remove = [&](int64_t row) {
    auto run = std::prev(active.upper_bound(row));
    const int64_t first = run->first, last = run->second;
    active.erase(run);
    if (first < row) active.emplace(first, row);
    if (row + 1 < last) active.emplace(row + 1, last);
  };
  const auto add = [&](int64_t row) {
    int64_t first = row, last = row + 1;
    auto after = active.find(row + 1);
    if (after != active.end()) {
      last = after->second;
      active.erase(after);
    }
    auto before = active.lower_bound(row);
    if (before != active.begin() && std::prev(before)->second == row) {
      --before;
      first = before->first;
      active.erase(before);
    }
    active.emplace(first, last);
  };
  IntervalPattern out = IntervalPattern::empty(p.num_cols, p.num_rows);
  size_t next_enter = 0, next_leave = 0;
  for (int64_t key = 0; key < p.num_cols; ++key) {
    for (; next_leave < leave.size() && leave[next_leave].key == key; ++next_leave) remove(leave[next_leave].row);
    for (; next_enter < enter.size() && enter[next_enter].key == key; ++next_enter) add(enter[next_enter].row);
    for (const auto& [first, last] : active) {
      out.begin.push_back(first);
      out.end.push_back(last);
    }
    out.row_ptr[to_size(key) + 1] = out.num_intervals();
  }
  return out;
}

template CsrPattern<int32_t> intervals_to_csr<int32_t>(const IntervalPattern&);
template CsrPattern<int64_t> intervals_to_csr<int64_t>(const IntervalPattern&);
template IntervalPattern csr_to_intervals<int32_t>(const CsrPatternView<int32_t>&);
template IntervalPattern csr_to_intervals<int64_t>(const CsrPatternView<int64_t>&);

}  // namespace sparse_formats
