// IEEE 754 half precision (binary16, NumPy's '<f2'), read: the value of an element from its bits.
// Every half is exactly a float, so there is nothing to round. spattn's half_t conversion
// (spattn/elements.hpp) and the .npy reader share it.
#pragma once

#include <cstdint>

namespace sparse_formats {

// Subnormals, signed zeros, infinities and NaN included.
float float16_value(uint16_t bits);

}  // namespace sparse_formats
