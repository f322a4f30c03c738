// Matrix Market (.mtx) reading and writing: https://math.nist.gov/MatrixMarket/formats.html
//
// Read:   %%MatrixMarket matrix coordinate (real | integer | pattern) (general | symmetric)
//         %%MatrixMarket matrix array      (real | integer)           general
// Banner keywords are case-insensitive. Lines starting with '%' and blank lines may appear
// anywhere after the banner; CRLF line ends are accepted. Indices in the file are 1-based.
// Coordinate files:
//   - entries may come in any order; the result is a valid CSR (columns increasing per row);
//   - explicit zeros are kept as stored entries (they are structure, e.g. a mask entry);
//   - pattern files get value 1.0 for every stored entry;
//   - symmetric files must be square and store only the lower triangle (row >= col); each
//     off-diagonal entry (i, j) is stored as both (i, j) and (j, i), diagonal entries once;
//   - duplicate (row, col) entries follow a DuplicatePolicy, by default `sum` (the Matrix Market /
//     scipy convention; for pattern files duplicates simply merge into one entry).
// Array files are stored column-major in the file and returned row-major in `dense`.
// Every malformed input throws FormatError "<source_name>:<line>: <what is wrong>", e.g.
//   "mask.mtx:14: expected 10 entries, found 7 (file ends early)". Rejected: a missing or bad
// banner; unsupported object / format / field / symmetry (vector, complex, hermitian,
// skew-symmetric, symmetric array, array pattern); a bad size line; negative sizes; counts that
// overflow int64 or exceed rows * cols (for symmetric files, the lower triangle with diagonal);
// zero-based or out-of-range indices; non-numeric tokens; wrong token counts; too few or too many
// entries; NaN / Inf / out-of-range values; integer-field values that are not integers or lie
// beyond +-2^53 (a double holds every integer up to 2^53 exactly, larger ones only rounded);
// duplicates whose sum is not finite (or, in an integer field, beyond +-2^53), naming both lines.
// What the reader allocates is bounded by what the file holds or the caller asked for:
//   - storage is reserved from the declared entry count only up to a small cap, so a lying count
//     costs nothing; entries are stored as they are read;
//   - the declared shape is checked against ReadLimits (read_limits.hpp): an expected extent that
//     differs is refused right after the size line ("mask.mtx:2: row count 1000 does not match
//     the expected 512 (ReadLimits::expected_rows)"); a row count that is not expected must be at
//     most limits.max_rows (default 2^24), which is checked once the entries have been read and
//     before anything sized by it (the CSR's num_rows + 1 row offsets) is allocated: a header
//     declaring 10^12 rows fails as "<file>:2: row count 1000000000000 exceeds the limit of
//     16777216 rows (ReadLimits::max_rows; ...)" with no more memory than its entries take. (A
//     file that is also malformed further on reports that first.) The column count costs the
//     reader nothing and is bounded only by an expectation. Shapes the caller allows that still
//     cannot be held (more than physical memory) are FormatErrors naming the size and the limit,
//     never std::bad_alloc.
//
// Write: coordinate pattern general (patterns), coordinate real general (valued CSR, values as
// %.17g so doubles round-trip exactly), array real general (dense, written column-major as the
// format requires). Inputs are checked before anything is written (structure, finite values);
// the file writers write to a temporary file in the target's directory and rename it over the
// target, so a failure never leaves a half-written file.
#pragma once

#include <sparse_formats/convert.hpp>  // DuplicatePolicy (the declaration only)
#include <sparse_formats/csr.hpp>
#include <sparse_formats/read_limits.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace sparse_formats {

struct MatrixMarketData {
  int64_t num_rows = 0;
  int64_t num_cols = 0;
  bool is_pattern = false;         // coordinate pattern file: csr.values are all 1.0
  bool is_dense = false;           // array file: `dense` holds the matrix and `csr` is an empty 0x0
  bool is_symmetric = false;       // the file was symmetric (already expanded into both triangles)
  CsrMatrix<int64_t, double> csr;  // coordinate files
  std::vector<double> dense;       // array files: (num_rows, num_cols) row-major
};

// `source_name` is only used in error messages (a file name, or e.g. "<string>"). `limits`
// bounds the declared shape (see above); pass ReadLimits::shape(rows, cols) when the shape the
// result must have is known.
MatrixMarketData read_matrix_market(std::istream& in, const std::string& source_name,
                                    DuplicatePolicy duplicates = DuplicatePolicy::sum,
                                    const ReadLimits& limits = {});
MatrixMarketData read_matrix_market_file(const std::string& path,
                                         DuplicatePolicy duplicates = DuplicatePolicy::sum,
                                         const ReadLimits& limits = {});

// The stored positions of any coordinate file (values ignored, duplicates merged), or the
// nonzeros of an array file. Index is int32_t or int64_t; throws if the shape or nnz does not fit.
template <typename Index = int64_t>
CsrPattern<Index> read_mask_mtx(const std::string& path, const ReadLimits& limits = {});
// A coordinate file as CSR (pattern files: values 1.0; duplicates summed), or the nonzeros of an
// array file. Index is int32_t or int64_t; throws if the shape or nnz does not fit.
template <typename Index = int64_t>
CsrMatrix<Index, double> read_csr_mtx(const std::string& path, const ReadLimits& limits = {});

// Writers. Index is int32_t or int64_t, Value float or double. The view must be a valid CSR
// (row_ptr starts at 0 and never decreases, columns in [0, num_cols)); values must be finite.
template <typename Index>
void write_matrix_market(std::ostream& out, const CsrPatternView<Index>& pattern);
template <typename Index, typename Value>
void write_matrix_market(std::ostream& out, const CsrMatrixView<Index, Value>& csr);
// `dense` is (num_rows, num_cols) row-major.
template <typename Value>
void write_matrix_market_dense(std::ostream& out, const Value* dense, int64_t num_rows,
                               int64_t num_cols);

template <typename Index>
void write_matrix_market_file(const std::string& path, const CsrPatternView<Index>& pattern);
template <typename Index, typename Value>
void write_matrix_market_file(const std::string& path, const CsrMatrixView<Index, Value>& csr);
template <typename Value>
void write_matrix_market_dense_file(const std::string& path, const Value* dense, int64_t num_rows,
                                    int64_t num_cols);

}  // namespace sparse_formats
