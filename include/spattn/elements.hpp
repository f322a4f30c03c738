// The element types of attention tensors: float and the two 16-bit types models train in, with
// their conversions. Part of the shared vocabulary (docs/architecture.md, "Layers").
#pragma once

#include <cstdint>
#include <type_traits>

namespace spattn {

// 16-bit element types, bit-compatible with CUDA's __half and __nv_bfloat16 (so that this header
// needs no CUDA header). Conversions from float round to nearest even (as __float2half_rn and
// __float2bfloat16_rn); NaN stays NaN.
struct half_t {
  uint16_t bits = 0;
};
struct bfloat16_t {
  uint16_t bits = 0;
};

half_t to_half(float value);
bfloat16_t to_bfloat16(float value);
float to_float(half_t value);
float to_float(bfloat16_t value);
inline float to_float(float value) { return value; }
// Identity for float; lets templated code round a float through the element type.
template <typename T>
T from_float(float value);
template <>
float from_float<float>(float value);
template <>
half_t from_float<half_t>(float value);
template <>
bfloat16_t from_float<bfloat16_t>(float value);

// Whether T is one of the 16-bit types.
template <typename T>
inline constexpr bool is_16bit_element_v = std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>;

enum class ElementType { fp32, fp16, bf16 };
const char* element_type_name(ElementType type);  // "fp32" / "fp16" / "bf16"
template <typename T>
constexpr ElementType element_type_of() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, half_t> || std::is_same_v<T, bfloat16_t>,
                "spattn element types are float, half_t and bfloat16_t");
  return std::is_same_v<T, float> ? ElementType::fp32 : std::is_same_v<T, half_t> ? ElementType::fp16 : ElementType::bf16;
}

}  // namespace spattn
