// COO (row, col[, value]) triplets -> CSR, with a policy for repeated (row, col) pairs.
//
// A stable counting sort by row, then a stable sort by column within each row: O(nnz log nnz +
// rows) time, O(nnz + rows) memory. Stability keeps the input order among duplicates, which is
// what the `last` policy and a deterministic `sum` need. Besides the input-sized sort order, the
// only arrays sized by the shape are the row counts and the result's row offsets (num_rows + 1
// each, the shape the caller asked for), allocated checked (format_internal.hpp).
#include <algorithm>
#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <string>
#include <vector>

#include "format_internal.hpp"

namespace sparse_formats {
namespace {

using internal::to_size;

// Checks the triplets and returns the input positions sorted by (row, col, position).
std::vector<int64_t> sorted_order(const char* context, int64_t num_rows, int64_t num_cols,
                                  const std::vector<int64_t>& rows,
                                  const std::vector<int64_t>& cols) {
  if (rows.size() != cols.size()) {
    fail(context, ": rows has ", rows.size(), " entries but cols has ", cols.size());
  }
  const int64_t count = static_cast<int64_t>(rows.size());
  for (int64_t k = 0; k < count; ++k) {
    const int64_t r = rows[to_size(k)];
    const int64_t c = cols[to_size(k)];
    if (r < 0 || r >= num_rows || c < 0 || c >= num_cols) {
      fail(context, ": entry ", k, " (rows[", k, "] = ", r, ", cols[", k, "] = ", c,
           ") is out of range for a ", num_rows, " x ", num_cols, " matrix");
    }
  }
  const auto what = [&] {
    return detail::concat("row counts (num_rows + 1 = ", static_cast<uint64_t>(num_rows) + 1, ")");
  };
  std::vector<int64_t> row_start =  // (num_rows + 1)
      internal::allocate<int64_t>(context, what, internal::saturating_plus_one(num_rows));
  for (const int64_t r : rows) ++row_start[to_size(r) + 1];
  for (int64_t r = 0; r < num_rows; ++r) row_start[to_size(r + 1)] += row_start[to_size(r)];
  std::vector<int64_t> order(to_size(count));  // (count)
  // row_start[r] as row r's cursor ends at row r + 1's start; shifting up by one restores it.
  for (int64_t k = 0; k < count; ++k) order[to_size(row_start[to_size(rows[to_size(k)])]++)] = k;
  for (int64_t r = num_rows; r > 0; --r) row_start[to_size(r)] = row_start[to_size(r - 1)];
  row_start[0] = 0;
  for (int64_t r = 0; r < num_rows; ++r) {
    std::stable_sort(order.begin() + row_start[to_size(r)],
                     order.begin() + row_start[to_size(r + 1)],
                     [&](int64_t a, int64_t b) { return cols[to_size(a)] < cols[to_size(b)]; });
  }
  return order;
}

// Walks the sorted triplets once, calling start(position) for the first entry of each distinct
// (row, col) and repeat(first_position, position) for each later one, and returns the structure.
template <typename Index, typename Start, typename Repeat>
CsrPattern<Index> merge_sorted(const char* context, int64_t num_rows, int64_t num_cols,
                               const std::vector<int64_t>& rows, const std::vector<int64_t>& cols,
                               const std::vector<int64_t>& order, Start&& start, Repeat&& repeat) {
  CsrPattern<Index> pattern = internal::empty_pattern<Index>(context, num_rows, num_cols);
  // Distinct pairs first, so that an nnz too large for Index throws before anything is built.
  int64_t nnz = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int64_t k = order[i];
    const bool repeats = i > 0 && rows[to_size(order[i - 1])] == rows[to_size(k)] &&
                         cols[to_size(order[i - 1])] == cols[to_size(k)];
    nnz += repeats ? 0 : 1;
  }
  internal::check_fits<Index>(context, "nnz", nnz);
  pattern.col_idx.reserve(to_size(nnz));

  int64_t first = -1;  // input position of the first entry of the current (row, col)
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int64_t k = order[i];
    const int64_t r = rows[to_size(k)];
    const int64_t c = cols[to_size(k)];
    if (i > 0 && rows[to_size(first)] == r && cols[to_size(first)] == c) {
      repeat(first, k);
      continue;
    }
    first = k;
    pattern.col_idx.push_back(static_cast<Index>(c));
    ++pattern.row_ptr[to_size(r) + 1];
    start(k);
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    pattern.row_ptr[to_size(r + 1)] += pattern.row_ptr[to_size(r)];
  }
  return pattern;
}

[[noreturn]] void fail_duplicate(const char* context, const std::vector<int64_t>& rows,
                                 const std::vector<int64_t>& cols, int64_t first, int64_t second) {
  fail(context, ": duplicate entry (", rows[to_size(first)], ", ", cols[to_size(first)],
       ") at positions ", first, " and ", second, " (duplicates are rejected)");
}

}  // namespace

template <typename Index, typename Value>
CsrMatrix<Index, Value> coo_to_csr(int64_t num_rows, int64_t num_cols,
                                   const std::vector<int64_t>& rows,
                                   const std::vector<int64_t>& cols,
                                   const std::vector<Value>& values, DuplicatePolicy duplicates) {
  const char* context = "coo_to_csr";
  internal::check_shape<Index>(context, num_rows, num_cols);
  if (values.size() != rows.size()) {
    fail(context, ": values has ", values.size(), " entries but rows has ", rows.size());
  }
  const std::vector<int64_t> order = sorted_order(context, num_rows, num_cols, rows, cols);
  CsrMatrix<Index, Value> csr;
  csr.pattern = merge_sorted<Index>(
      context, num_rows, num_cols, rows, cols, order,
      [&](int64_t k) { csr.values.push_back(values[to_size(k)]); },
      [&](int64_t first, int64_t k) {
        switch (duplicates) {
          case DuplicatePolicy::reject:
            fail_duplicate(context, rows, cols, first, k);
          case DuplicatePolicy::sum:
            csr.values.back() += values[to_size(k)];
            break;
          case DuplicatePolicy::last:
            csr.values.back() = values[to_size(k)];
            break;
        }
      });
  return csr;
}

template <typename Index>
CsrPattern<Index> coo_to_csr_pattern(int64_t num_rows, int64_t num_cols,
                                     const std::vector<int64_t>& rows,
                                     const std::vector<int64_t>& cols, DuplicatePolicy duplicates) {
  const char* context = "coo_to_csr_pattern";
  internal::check_shape<Index>(context, num_rows, num_cols);
  const std::vector<int64_t> order = sorted_order(context, num_rows, num_cols, rows, cols);
  // Without values, `sum` and `last` both keep the pair once.
  return merge_sorted<Index>(
      context, num_rows, num_cols, rows, cols, order, [](int64_t) {},
      [&](int64_t first, int64_t k) {
        if (duplicates == DuplicatePolicy::reject) fail_duplicate(context, rows, cols, first, k);
      });
}

template CsrMatrix<int32_t, float> coo_to_csr<int32_t, float>(int64_t, int64_t,
                                                              const std::vector<int64_t>&,
                                                              const std::vector<int64_t>&,
                                                              const std::vector<float>&,
                                                              DuplicatePolicy);
template CsrMatrix<int32_t, double> coo_to_csr<int32_t, double>(int64_t, int64_t,
                                                                const std::vector<int64_t>&,
                                                                const std::vector<int64_t>&,
                                                                const std::vector<double>&,
                                                                DuplicatePolicy);
template CsrMatrix<int64_t, float> coo_to_csr<int64_t, float>(int64_t, int64_t,
                                                              const std::vector<int64_t>&,
                                                              const std::vector<int64_t>&,
                                                              const std::vector<float>&,
                                                              DuplicatePolicy);
template CsrMatrix<int64_t, double> coo_to_csr<int64_t, double>(int64_t, int64_t,
                                                                const std::vector<int64_t>&,
                                                                const std::vector<int64_t>&,
                                                                const std::vector<double>&,
                                                                DuplicatePolicy);
template CsrPattern<int32_t> coo_to_csr_pattern<int32_t>(int64_t, int64_t,
                                                         const std::vector<int64_t>&,
                                                         const std::vector<int64_t>&,
                                                         DuplicatePolicy);
template CsrPattern<int64_t> coo_to_csr_pattern<int64_t>(int64_t, int64_t,
                                                         const std::vector<int64_t>&,
                                                         const std::vector<int64_t>&,
                                                         DuplicatePolicy);

}  // namespace sparse_formats
