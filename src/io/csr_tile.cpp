// The CSR load's counting rule (io.hpp, "CSR inputs") as a formula over the CSR structure, for
// the predictions. It shares no code with the loader (io_inline.hpp), which counts as it reads:
// io_csr_test checks the two agree on every tile shape.
#include <spattn/io.hpp>

#include <algorithm>
#include <cassert>

namespace spattn::io {

int64_t csr_search_probes(int64_t length) {
  if (length <= 0) return 0;
  int64_t probes = 1;  // the final comparison
  for (int64_t span = 1; span < length; span *= 2) ++probes;  // ceil(log2 length) halvings
  return probes;
}

namespace {

// The column-index positions the loader's branch-free lower bound probes over [begin, end) for
// col0, as [first, last] (first > last when it probes none), and the lower bound itself.
struct SearchSpan {
  int64_t first, last, bound;
};
SearchSpan search_span(const int64_t* col_idx, int64_t begin, int64_t end, int64_t col0) {
  SearchSpan span{end, -1, begin};
  if (begin >= end) return span;
  const auto probe = [&](int64_t position) {
    span.first = std::min(span.first, position);
    span.last = std::max(span.last, position);
    return col_idx[position];
  };
  int64_t p = begin;
  for (int64_t length = end - begin; length > 1;) {
    const int64_t half = length / 2;
    if (probe(p + half) < col0) p += half;
    length -= half;
  }
  if (probe(p) < col0) ++p;
  span.bound = p;
  return span;
}

}  // namespace

template <typename Value>
CsrTileWords csr_tile_words(const sparse_formats::CsrMatrixView<int64_t, Value>& csr, int64_t row0,
                            int64_t rows, int64_t col0, int64_t cols, int64_t line_words) {
  assert(row0 >= 0 && col0 >= 0 && row0 + rows <= csr.num_rows() && col0 + cols <= csr.num_cols());
  CsrTileWords words;
  if (rows <= 0 || cols <= 0) return words;
  const int64_t* row_ptr = csr.pattern.row_ptr;
  const int64_t* col_idx = csr.pattern.col_idx;
  words.indices = rows + 1;
  words.index_lines = segment_lines(row0, rows + 1, line_words);
  const bool full_width = col0 == 0 && cols == csr.num_cols();
  const int64_t col_end = col0 + cols;
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const int64_t begin = row_ptr[r], end = row_ptr[r + 1];
    if (full_width) {  // every entry of the row, no search, no stop word
      words.values += end - begin;
      words.indices += end - begin;
      words.value_lines += segment_lines(begin, end - begin, line_words);
      words.index_lines += segment_lines(begin, end - begin, line_words);
      continue;
    }
    const int64_t first = std::lower_bound(col_idx + begin, col_idx + end, col0) - col_idx;
    const int64_t past = std::lower_bound(col_idx + first, col_idx + end, col_end) - col_idx;
    const int64_t in_tile = past - first;
    const bool stop = past < end;
    words.values += in_tile;
    words.indices += (col0 > 0 ? csr_search_probes(end - begin) : 0) + in_tile + (stop ? 1 : 0);
    words.value_lines += segment_lines(first, in_tile, line_words);
    // The index positions read: the search's probes, then from the first entry in the tile to the
    // last one or the stop word.
    SearchSpan span{end, -1, begin};
    if (col0 > 0) span = search_span(col_idx, begin, end, col0);
    assert(span.bound == first);
    const int64_t scanned_last = stop ? past : past - 1;
    if (scanned_last >= first) {
      span.first = std::min(span.first, first);
      span.last = std::max(span.last, scanned_last);
    }
    if (span.last >= span.first) words.index_lines += segment_lines(span.first, span.last - span.first + 1, line_words);
  }
  return words;
}

template CsrTileWords csr_tile_words<float>(const sparse_formats::CsrMatrixView<int64_t, float>&,
                                            int64_t, int64_t, int64_t, int64_t, int64_t);
template CsrTileWords csr_tile_words<double>(const sparse_formats::CsrMatrixView<int64_t, double>&,
                                             int64_t, int64_t, int64_t, int64_t, int64_t);

}  // namespace spattn::io
