// Union and intersection of two masks of the same shape: a sorted merge of each pair of rows, run
// twice (count, then write) so the result is allocated exactly and an index overflow is refused
// before allocating.
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

namespace sparse_formats {

using namespace patterns_internal;

namespace {

template <typename Index>
void check_operands(const char* op, const CsrPatternView<Index>& a,
                    const CsrPatternView<Index>& b) {
  for (const auto& [name, view] : {std::pair{"a", &a}, std::pair{"b", &b}}) {
    if (view->num_rows < 0 || view->num_cols < 0) {
      fail(op, ": ", name, " has a negative shape ", view->num_rows, " x ", view->num_cols);
    }
    if (view->row_ptr == nullptr && view->num_rows > 0) {
      fail(op, ": ", name, " has ", view->num_rows, " rows but no row_ptr");
    }
  }
  if (a.num_rows != b.num_rows || a.num_cols != b.num_cols) {
    fail(op, ": shapes differ: a is ", a.num_rows, " x ", a.num_cols, ", b is ", b.num_rows, " x ",
         b.num_cols);
  }
}

// Merges row `row` of a and b, calling emit(col) for each column of the union (keep_both_only =
// false) or the intersection (true), in increasing order.
template <typename Index, typename Emit>
void merge_row(const CsrPatternView<Index>& a, const CsrPatternView<Index>& b, int64_t row,
               bool keep_both_only, Emit&& emit) {
  int64_t pa = a.row_begin(row);
  int64_t pb = b.row_begin(row);
  const int64_t ea = a.row_end(row);
  const int64_t eb = b.row_end(row);
  while (pa < ea && pb < eb) {
    const Index ca = a.col_idx[pa];
    const Index cb = b.col_idx[pb];
    if (ca == cb) {
      emit(ca);
      ++pa;
      ++pb;
    } else if (ca < cb) {
      if (!keep_both_only) emit(ca);
      ++pa;
    } else {
      if (!keep_both_only) emit(cb);
      ++pb;
    }
  }
  if (keep_both_only) return;
  for (; pa < ea; ++pa) emit(a.col_idx[pa]);
  for (; pb < eb; ++pb) emit(b.col_idx[pb]);
}

template <typename Index>
CsrPattern<Index> merge(const char* op, const CsrPatternView<Index>& a,
                        const CsrPatternView<Index>& b, bool keep_both_only) {
  check_operands(op, a, b);
  std::vector<Index> row_ptr(static_cast<size_t>(a.num_rows) + 1, Index{0});
  int64_t nnz = 0;
  for (int64_t row = 0; row < a.num_rows; ++row) {
    int64_t count = 0;
    merge_row(a, b, row, keep_both_only, [&](Index) { ++count; });
    if (count > index_max<Index>() - nnz) fail_nnz<Index>(op, sat_add(nnz, count), row + 1);
    nnz += count;
    row_ptr[static_cast<size_t>(row) + 1] = static_cast<Index>(nnz);
  }
  std::vector<Index> col_idx(static_cast<size_t>(nnz));
  Index* out = col_idx.data();
  for (int64_t row = 0; row < a.num_rows; ++row) {
    merge_row(a, b, row, keep_both_only, [&](Index col) { *out++ = col; });
  }
  return CsrPattern<Index>(a.num_rows, a.num_cols, std::move(row_ptr), std::move(col_idx));
}

}  // namespace

template <typename Index>
CsrPattern<Index> pattern_union(const CsrPatternView<Index>& a, const CsrPatternView<Index>& b) {
  return merge("pattern_union", a, b, false);
}

template <typename Index>
CsrPattern<Index> pattern_intersection(const CsrPatternView<Index>& a,
                                       const CsrPatternView<Index>& b) {
  return merge("pattern_intersection", a, b, true);
}

template CsrPattern<int32_t> pattern_union<int32_t>(const CsrPatternView<int32_t>&,
                                                    const CsrPatternView<int32_t>&);
template CsrPattern<int64_t> pattern_union<int64_t>(const CsrPatternView<int64_t>&,
                                                    const CsrPatternView<int64_t>&);
template CsrPattern<int32_t> pattern_intersection<int32_t>(const CsrPatternView<int32_t>&,
                                                           const CsrPatternView<int32_t>&);
template CsrPattern<int64_t> pattern_intersection<int64_t>(const CsrPatternView<int64_t>&,
                                                           const CsrPatternView<int64_t>&);

}  // namespace sparse_formats
