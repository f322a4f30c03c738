// The 16-bit conversions of spattn/elements.hpp: round to nearest even, as __float2half_rn and
// __float2bfloat16_rn.
#include <spattn/elements.hpp>

#include <sparse_formats/float16.hpp>

#include <cmath>
#include <cstring>

namespace spattn {
namespace {

uint32_t bits_of(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}
float float_of(uint32_t bits) {
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}
// x >> shift rounded to nearest, ties to even (1 <= shift <= 31).
uint32_t shift_round_even(uint32_t x, int shift) {
  const uint32_t kept = x >> shift;
  const uint32_t rest = x & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u) != 0)) ? 1u : 0u);
}

}  // namespace

half_t to_half(float value) {
  const uint32_t x = bits_of(value);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t magnitude = x & 0x7fffffffu;
  half_t h;
  if (magnitude > 0x7f800000u) {
    h.bits = static_cast<uint16_t>(sign | 0x7e00u);  // NaN (quiet)
  } else if (magnitude >= 0x47800000u) {
    h.bits = static_cast<uint16_t>(sign | 0x7c00u);  // >= 2^16 (or inf): infinity
  } else if (magnitude >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent, round 13 mantissa bits away. A carry out of
    // the mantissa steps the exponent, up to infinity (0x7c00) for values >= 65520.
    h.bits = static_cast<uint16_t>(sign | (shift_round_even(magnitude, 13) - ((127u - 15u) << 10)));
  } else if (magnitude >= 0x33000000u) {
    // Subnormal half: value = mantissa * 2^(exponent - 150); in units of 2^-24 that is
    // mantissa >> (126 - exponent), 14 <= shift <= 25.
    const uint32_t exponent = magnitude >> 23;
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    h.bits = static_cast<uint16_t>(sign | shift_round_even(mantissa, static_cast<int>(126u - exponent)));
  } else {
    h.bits = sign;  // below half the smallest subnormal: signed zero
  }
  return h;
}

float to_float(half_t value) { return sparse_formats::float16_value(value.bits); }

bfloat16_t to_bfloat16(float value) {
  const uint32_t x = bits_of(value);
  bfloat16_t b;
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    b.bits = static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN (quiet)
  } else {
    b.bits = static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
  return b;
}

float to_float(bfloat16_t value) { return float_of(static_cast<uint32_t>(value.bits) << 16); }

template <>
float from_float<float>(float value) {
  return value;
}
template <>
half_t from_float<half_t>(float value) {
  return to_half(value);
}
template <>
bfloat16_t from_float<bfloat16_t>(float value) {
  return to_bfloat16(value);
}

const char* element_type_name(ElementType type) {
  return type == ElementType::fp32 ? "fp32" : type == ElementType::fp16 ? "fp16" : "bf16";
}

}  // namespace spattn
