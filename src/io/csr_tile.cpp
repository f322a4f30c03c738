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

template <typename Value>
CsrTileWords csr_tile_words(const sparse_formats::CsrMatrixView<int64_t, Value>& csr, int64_t row0,
                            int64_t rows, int64_t col0, int64_t cols) {
  assert(row0 >= 0 && col0 >= 0 && row0 + rows <= csr.num_rows() && col0 + cols <= csr.num_cols());
  CsrTileWords words;
  if (rows <= 0 || cols <= 0) return words;
  const int64_t* row_ptr = csr.pattern.row_ptr;
  const int64_t* col_idx = csr.pattern.col_idx;
  words.indices = rows + 1;
  if (col0 == 0 && cols == csr.num_cols()) {  // full width: every entry of the rows, no search
    const int64_t nnz = row_ptr[row0 + rows] - row_ptr[row0];
    words.values = nnz;
    words.indices += nnz;
    return words;
  }
  const int64_t col_end = col0 + cols;
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const int64_t* begin = col_idx + row_ptr[r];
    const int64_t* end = col_idx + row_ptr[r + 1];
    const int64_t* first = std::lower_bound(begin, end, col0);
    const int64_t* past = std::lower_bound(first, end, col_end);
    const int64_t in_tile = past - first;
    words.values += in_tile;
    words.indices += (col0 > 0 ? csr_search_probes(end - begin) : 0) + in_tile + (past < end ? 1 : 0);
  }
  return words;
}

template CsrTileWords csr_tile_words<float>(const sparse_formats::CsrMatrixView<int64_t, float>&,
                                            int64_t, int64_t, int64_t, int64_t);
template CsrTileWords csr_tile_words<double>(const sparse_formats::CsrMatrixView<int64_t, double>&,
                                             int64_t, int64_t, int64_t, int64_t);

}  // namespace spattn::io
