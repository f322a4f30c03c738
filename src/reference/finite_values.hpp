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

// Throws InvalidArgument "<where>: <name>[b, h, i, j] = nan is not finite (...)" at the first
// element that is NaN or infinite; with `minus_infinity_allowed` (an LSE, always float), -inf
// passes.
template <typename T>
void check_finite(const char* where, const char* name, const TensorView<const T>& t,
                  bool minus_infinity_allowed = false) {
  if (t.data == nullptr) return;  // no elements (the shape checks refuse data-less tensors with any)
  for (int64_t b = 0; b < t.shape[0]; ++b) {
    for (int64_t h = 0; h < t.shape[1]; ++h) {
      for (int64_t i = 0; i < t.shape[2]; ++i) {
        const T* row = t.row(b, h, i);
        const int64_t step = t.stride[3];
        if constexpr (!is_16bit_element_v<T>) {
          // The common case in one branch-free pass (x - x is 0 for finite x and NaN otherwise).
          T sum = 0;
          for (int64_t j = 0; j < t.shape[3]; ++j) sum += row[j * step] - row[j * step];
          if (sum == 0) continue;
        }
        for (int64_t j = 0; j < t.shape[3]; ++j) {
          const T value = row[j * step];
          if (finite_element(value, minus_infinity_allowed)) continue;
          double printed = 0.0;
          if constexpr (is_16bit_element_v<T>) printed = to_float(value);
          else printed = static_cast<double>(value);
          fail(where, ": ", name, "[", b, ", ", h, ", ", i, ", ", j, "] = ", printed,
               " is not finite (spattn refuses NaN and infinity in its inputs; docs/api.md)");
        }
      }
    }
  }
}

}  // namespace spattn::reference
