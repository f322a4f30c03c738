// NumPy .npy reading and writing:
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
//
// Read: format versions 1.0, 2.0 and 3.0; dtypes '<f2', '<f4' and '<f8' only, read into float or
// double (converting: '<f2' exactly, '<f8' read as float rounds to nearest, and a finite value
// beyond float's range is an error); 'fortran_order' must be False; any rank, including 0-d (one element) and shapes with a
// zero dimension (no elements). NaN / Inf stored in the file are passed through unchanged.
// Rejected with FormatError "<source_name>: <what is wrong>" naming the header field and value:
// bad magic, unsupported version, a header longer than 65536 bytes, a malformed header dict
// (missing / extra / repeated keys, bad literals), big-endian or other dtypes, structured or
// object arrays, Fortran order, negative dimensions, a shape whose element or byte count
// overflows, and a data size that does not match the shape exactly (truncated or trailing bytes).
// All of this is checked before the data is allocated, so what the reader allocates is bounded by
// the file's size: a 100-byte file declaring shape (1000000000000,) fails as "data is 16 bytes but
// shape (1000000000000,) of '<f8' needs 8000000000000 bytes (file truncated)". A caller that knows
// the shape it needs passes it in NpyReadLimits (read_limits.hpp); a different rank or extent is
// refused right after the header ("header field 'shape' = (2, 3) does not match the expected
// (2, 4)").
//
// Write: version 1.0, '<f4' for float and '<f8' for double, C order, header padded with spaces to
// a multiple of 64 bytes and ended by '\n'. The file writer writes a temporary file in the
// target's directory and renames it over the target, so a failure never leaves a half-written file.
#pragma once

#include <sparse_formats/read_limits.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace sparse_formats {

template <typename T>
struct NpyArrayT {
  std::vector<int64_t> shape;  // empty for a 0-d array
  std::vector<T> data;         // C order, product(shape) elements (1 for a 0-d array)

  int64_t size() const { return static_cast<int64_t>(data.size()); }
};
using NpyArray = NpyArrayT<double>;

// T is float or double. The stream must be seekable (its length is checked before reading).
template <typename T>
NpyArrayT<T> read_npy(std::istream& in, const std::string& source_name,
                      const NpyReadLimits& limits = {});
template <typename T>
NpyArrayT<T> read_npy(const std::string& path, const NpyReadLimits& limits = {});

// `data` holds product(shape) elements in C order (may be null when that product is 0).
// Dimensions must be >= 0.
template <typename T>
void write_npy(std::ostream& out, const T* data, const std::vector<int64_t>& shape);
template <typename T>
void write_npy(const std::string& path, const T* data, const std::vector<int64_t>& shape);

}  // namespace sparse_formats
