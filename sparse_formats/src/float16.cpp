// IEEE half precision to float (float16.hpp).
#include <sparse_formats/float16.hpp>

#include <cmath>

namespace sparse_formats {

float float16_value(uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude = 0.0f;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal: mantissa * 2^-24
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace sparse_formats
