// The non-finite input policy (docs/api.md, "Non-finite values"): every entry point refuses NaN and
// infinity in its inputs before anything runs, naming the tensor and the element, and computes
// nothing. An LSE may hold -inf (the row attends nothing) but not NaN or +inf. The reason: spattn's
// algorithms treat a row without a finite score as empty (o = 0, lse = -inf), so a NaN that got in
// would come out as a plausible "fully masked row" instead of as NaN; refusing at the boundary makes
// every algorithm, pass and input kind behave the same.
#pragma once

#include <spattn/elements.hpp>
#include <spattn/error.hpp>
#include <spattn/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace spattn::reference {

// Whether one element is finite, and may pass as -inf (an LSE's empty row); 16-bit elements are
// read from their bits (an all-ones exponent is infinity or NaN), so no conversion runs.
template <typename T>
bool finite_element(T value, bool minus_infinity_allowed) {
  if constexpr (is_16bit_element_v<T>) {
    const uint16_t exponent = std::is_same_v<T, half_t> ? 0x7c00 : 0x7f80;
    return (value.bits & exponent) != exponent;
  } else {
    return std::isfinite(value) || (minus_infinity_allowed && value < 0 && std::isinf(value));
  }
}

// Whether a row of `count` elements `step` apart holds an element whose exponent bits are all ones
// (NaN or an infinity, -inf included), read from the bits alone: an OR over the row with no branch
// and no float arithmetic, which the compiler vectorizes. (A float sum of x - x over the row is a
// chain of dependent adds: the check took 6.6 % of a windowed fwd + bwd's samples on 2 threads,
// all on the calling thread.)
template <typename T>
bool row_has_non_finite_bits(const T* row, int64_t count, int64_t step) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "an IEEE element of 16, 32 or 64 bits");
  using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
  constexpr auto kExponent = static_cast<Bits>(std::is_same_v<T, half_t>       ? 0x7c00ull
                                               : std::is_same_v<T, bfloat16_t> ? 0x7f80ull
                                               : sizeof(T) == 4                ? 0x7f800000ull
                                                                               : 0x7ff0000000000000ull);
  Bits found = 0;
  for (int64_t j = 0; j < count; ++j) {
    Bits bits;
    std::memcpy(&bits, row + j * step, sizeof bits);
    found |= static_cast<Bits>((bits & kExponent) == kExponent);
  }
  return found != 0;
}

// The first column of a row of `count` elements `step` apart that finite_element refuses, or
// `count` when none is.
template <typename T>
int64_t first_refused_column(const T* row, int64_t count, int64_t step, bool minus_infinity_allowed) {
  for (int64_t j = 0; j < count; ++j) {
    if (!finite_element(row[j * step], minus_infinity_allowed)) return j;
  }
  return count;
}

// A tensor's rows as first_non_finite_row numbers them (b, h, i in that order): batch x heads x seqlen.
template <typename T>
int64_t flat_rows(const TensorView<T>& t) {
  return t.shape[0] * t.shape[1] * t.shape[2];
}

// The first of t's rows [begin, end) (flat_rows numbering) that holds an element finite_element
// refuses, or `end` when none does.
template <typename T>
int64_t first_non_finite_row(const TensorView<const T>& t, int64_t begin, int64_t end,
                             bool minus_infinity_allowed = false) {
  if (t.data == nullptr) return end;
  const int64_t heads = t.shape[1], seqlen = t.shape[2], cols = t.shape[3], step = t.stride[3];
  if (begin >= end) return end;
  int64_t b = begin / (heads * seqlen), h = begin / seqlen % heads, i = begin % seqlen;
  for (int64_t flat = begin; flat < end; ++flat) {
    const T* row = t.row(b, h, i);
    // (-inf may be allowed: a row the bits flag is judged element by element)
    if (row_has_non_finite_bits(row, cols, step) &&
        first_refused_column(row, cols, step, minus_infinity_allowed) < cols) {
      return flat;
    }
    if (++i == seqlen) {
      i = 0;
      if (++h == heads) {
        h = 0;
        ++b;
      }
    }
  }
  return end;
}

// Throws InvalidArgument "<where>: <name>[b, h, i, j] = nan is not finite (...)" at the first
// element that is NaN or infinite; with `minus_infinity_allowed` (an LSE, always float), -inf
// passes.
template <typename T>
void check_finite(const char* where, const char* name, const TensorView<const T>& t,
                  bool minus_infinity_allowed = false) {
  const int64_t rows = flat_rows(t);
  const int64_t flat = first_non_finite_row(t, 0, rows, minus_infinity_allowed);
  if (flat == rows) return;
  const int64_t heads = t.shape[1], seqlen = t.shape[2];
  const int64_t b = flat / (heads * seqlen), h = flat / seqlen % heads, i = flat % seqlen;
  const T* row = t.row(b, h, i);
  const int64_t j = first_refused_column(row, t.shape[3], t.stride[3], minus_infinity_allowed);
  const T value = row[j * t.stride[3]];
  double printed = 0.0;
  if constexpr (is_16bit_element_v<T>) printed = to_float(value);
  else printed = static_cast<double>(value);
  fail(where, ": ", name, "[", b, ", ", h, ", ", i, ", ", j, "] = ", printed,
       " is not finite (spattn refuses NaN and infinity in its inputs; docs/api.md)");
}

}  // namespace spattn::reference
