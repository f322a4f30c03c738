// What a file reader may be made to allocate: the caller's bounds on the shapes that headers
// declare (matrix_market.hpp, npy.hpp).
//
// A header is a few bytes that can claim anything. What a reader stores as it reads (entries,
// values) grows with what the file holds, so a lying entry count costs nothing; but a CSR result
// holds num_rows + 1 row offsets however few entries it has, so a declared row count is an
// allocation. These limits decide which declared shapes get that far:
//   - an expected extent (the caller knows it: a mask must be seqlen_q x seqlen_k) must match
//     exactly; a mismatch is refused right after the size line / header, before any allocation;
//   - a row count without an expectation must be at most max_rows, checked before anything sized
//     by it is allocated (by the Matrix Market reader once the entries, stored as they are read,
//     are in: a file malformed further on reports that first).
// The column count costs a reader nothing (a 1 x 3000000000 pattern with one entry is a few bytes
// of CSR), so only an expectation bounds it; a caller that will transpose or densify a matrix
// should pass one (those conversions refuse, by name, results larger than physical memory).
// Every refusal is a FormatError naming the file, the line (Matrix Market), the field, the value
// and the expectation or limit; never std::bad_alloc.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace sparse_formats {

// In an expected shape: any extent is accepted in this position.
inline constexpr int64_t kAnyExtent = -1;

// Bounds for the Matrix Market readers (read_matrix_market and the functions built on it).
struct ReadLimits {
  // The default bound on a declared row count the caller did not fix: 2^24 = 16777216. At that
  // many rows the row offsets take 128 MiB (int64), so a 30-byte header costs at most that much.
  // A bound on the offsets' bytes rather than on the file's size, because a valid mask may be
  // nearly empty (a short file of a long shape). It is 128 times the longest context the project
  // runs (131072); larger files need their shape passed as expected, or a larger max_rows.
  static constexpr int64_t kDefaultMaxRows = int64_t{1} << 24;

  int64_t expected_rows = kAnyExtent;  // the row count the caller needs, or kAnyExtent
  int64_t expected_cols = kAnyExtent;  // the column count the caller needs, or kAnyExtent
  int64_t max_rows = kDefaultMaxRows;  // bound on a row count that is not expected (>= 0)

  // Limits that accept only a rows x cols matrix (either may be kAnyExtent).
  static ReadLimits shape(int64_t rows, int64_t cols) {
    ReadLimits limits;
    limits.expected_rows = rows;
    limits.expected_cols = cols;
    return limits;
  }
};

// Bounds for read_npy. The data is always bounded by the file: the bytes the header's shape and
// dtype declare must equal the bytes after the header (an element count whose byte count
// overflows is refused), which is checked before the data is allocated; no row limit applies.
struct NpyReadLimits {
  // The shape the caller needs, kAnyExtent accepting any extent in its position; unset: any
  // shape. A different rank or extent is refused right after the header, before the data is read.
  std::optional<std::vector<int64_t>> expected_shape;

  static NpyReadLimits shape(std::vector<int64_t> expected) {
    NpyReadLimits limits;
    limits.expected_shape = std::move(expected);
    return limits;
  }
};

}  // namespace sparse_formats
