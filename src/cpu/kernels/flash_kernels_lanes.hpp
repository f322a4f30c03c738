// The lane types of the flash kernels (flash_kernels_impl.hpp): L::V is a vector of L::kLanes
// floats (GCC/Clang vector types) or a plain float (Lanes1, the scalar fallback and the only type
// for other compilers), with loads, stores, selects and a branch-free exp written once for all.
// Included (through flash_kernels_impl.hpp) by the one translation unit per instruction set
// (flash_kernels_portable.cpp, _avx2.cpp, _avx512.cpp), each of which compiles it for its own
// target and names its own namespace (SPATTN_KERNEL_NAMESPACE), so that no inline function
// compiled for one instruction set can stand in for another's at link time.
//
// Why vector types rather than loops left to the auto-vectorizer: the products need their
// accumulators held in registers across the head_dim loop (register blocking), and GCC 12 turns
// the equivalent plain loops into stack traffic or vectorizes the wrong loop.
#pragma once

#ifndef SPATTN_KERNEL_NAMESPACE
#error "define SPATTN_KERNEL_NAMESPACE (one per instruction set) before including the kernels"
#endif

#include "cpu/kernels/exp_constants.hpp"

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__GNUC__)
#define SPATTN_KERNEL_INLINE inline __attribute__((always_inline))
#define SPATTN_KERNEL_OUTLINE inline __attribute__((noinline))
#define SPATTN_RESTRICT __restrict__
#else
#define SPATTN_KERNEL_INLINE inline
#define SPATTN_KERNEL_OUTLINE inline
#define SPATTN_RESTRICT
#endif
// Loops over register-block indices (compile-time counts) must unroll completely, or their
// accumulators live on the stack.
#if defined(__clang__)
#define SPATTN_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SPATTN_UNROLL _Pragma("GCC unroll 32")
#else
#define SPATTN_UNROLL
#endif

#if defined(__GNUC__) && !defined(__clang__)
// Vector values only pass between functions of one translation unit, all compiled for the same
// instruction set, so the ABI note GCC attaches to 32- and 64-byte vector parameters does not
// apply. (GCC reports it at the end of the translation unit, so it stays off to the end.)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

constexpr float kNegInf = kExpConstants.neg_inf;

// ---- lane types ----------------------------------------------------------------------------

struct Lanes1 {
  static constexpr int kLanes = 1;
  using V = float;
  using Vi = int32_t;
};
#if defined(__GNUC__)
struct Lanes4 {
  static constexpr int kLanes = 4;
  typedef float V __attribute__((vector_size(16)));
  typedef int32_t Vi __attribute__((vector_size(16)));
};
struct Lanes8 {
  static constexpr int kLanes = 8;
  typedef float V __attribute__((vector_size(32)));
  typedef int32_t Vi __attribute__((vector_size(32)));
};
struct Lanes16 {
  static constexpr int kLanes = 16;
  typedef float V __attribute__((vector_size(64)));
  typedef int32_t Vi __attribute__((vector_size(64)));
};
#endif

template <typename L>
SPATTN_KERNEL_INLINE typename L::V load(const float* p) {
  typename L::V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename L>
SPATTN_KERNEL_INLINE void store(float* p, typename L::V v) {
  std::memcpy(p, &v, sizeof v);
}
// Keeps a loaded vector in a register: GCC would otherwise fold the load into every multiply-add
// that uses it (one load per use), which makes the score products load-bound.
template <typename V>
SPATTN_KERNEL_INLINE void keep_in_register(V& v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  __asm__("" : "+v"(v));
#else
  (void)v;
#endif
}

template <typename L>
SPATTN_KERNEL_INLINE typename L::V splat(float x) {
  return typename L::V{} + x;
}
// Lanes [first, kLanes) of v to p[first..]; the lanes before `first` were written already.
template <typename L>
SPATTN_KERNEL_INLINE void store_from(float* p, typename L::V v, int64_t first) {
  float lanes[L::kLanes];
  std::memcpy(lanes, &v, sizeof v);
  for (int64_t l = first; l < L::kLanes; ++l) p[l] = lanes[l];
}

SPATTN_KERNEL_INLINE int32_t to_int(float x) { return static_cast<int32_t>(x); }
SPATTN_KERNEL_INLINE float bits_to_float(int32_t x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
#if defined(__GNUC__)
template <typename V, typename Vi>
SPATTN_KERNEL_INLINE Vi to_int(V x) {
  return __builtin_convertvector(x, Vi);
}
template <typename V, typename Vi>
SPATTN_KERNEL_INLINE V bits_to_float(Vi x) {
  V f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
#endif

template <typename L>
SPATTN_KERNEL_INLINE typename L::Vi to_int_lanes(typename L::V x) {
  if constexpr (L::kLanes == 1) {
    return to_int(x);
  } else {
    return to_int<typename L::V, typename L::Vi>(x);
  }
}
template <typename L>
SPATTN_KERNEL_INLINE typename L::V bits_to_float_lanes(typename L::Vi x) {
  if constexpr (L::kLanes == 1) {
    return bits_to_float(x);
  } else {
    return bits_to_float<typename L::V, typename L::Vi>(x);
  }
}

// exp(x) lane-wise, branch-free (Cephes expf): x = k ln2 + r with |r| <= ln2 / 2, exp(r) by a
// degree-7 polynomial, 2^k through the exponent bits. About 1 ulp on [-87, 88]; exactly 0 below
// -87 (so exp(-inf) = 0, as the masked scores need), exp(0) = 1 exactly, and NaN for NaN (the
// clamp sends a NaN lane to -87 first, so that the integer conversion and the shift below stay
// defined, and the last select hands the NaN back). The constants are exp_constants.hpp's:
// literals by default, read from memory where `c` is kExpConstantsLine.
template <typename L>
SPATTN_KERNEL_INLINE typename L::V exp_lanes(typename L::V x, const ExpConstants& c = kExpConstants) {
  using V = typename L::V;
  const V lo = splat<L>(c.lo);
  const V hi = splat<L>(c.hi);
  V xc = x > lo ? x : lo;  // NaN compares false: lo
  xc = xc > hi ? hi : xc;
  const V k = (xc * c.log2e + c.round) - c.round;
  V r = xc - k * c.ln2_hi;
  r = r - k * c.ln2_lo;
  V p = splat<L>(c.poly[0]);
  p = p * r + c.poly[1];
  p = p * r + c.poly[2];
  p = p * r + c.poly[3];
  p = p * r + c.poly[4];
  p = p * r + c.poly[5];
  const V y = p * r * r + r + c.one;
  // k is in [-126, 127] after the clamp, so 2^k is a normal float.
  const auto exponent = (to_int_lanes<L>(k) + 127) << 23;
  const V result = y * bits_to_float_lanes<L>(exponent);
  return x >= lo ? result : (x < lo ? splat<L>(0.0f) : x);  // neither holds for NaN
}

template <typename L>
SPATTN_KERNEL_INLINE typename L::V max_lanes(typename L::V a, typename L::V b) {
  return a < b ? b : a;
}

// Lane l is `a` where l < first, else `b` (the lanes a chunk that overlaps the one before must
// leave alone).
template <typename L>
SPATTN_KERNEL_INLINE typename L::V keep_below(int64_t first, typename L::V a, typename L::V b) {
  if constexpr (L::kLanes == 1) {
    return first > 0 ? a : b;
  } else {
    int32_t index[L::kLanes];
    for (int l = 0; l < L::kLanes; ++l) index[l] = l;
    typename L::Vi lanes;
    std::memcpy(&lanes, index, sizeof lanes);
    return lanes < (typename L::Vi{} + static_cast<int32_t>(first)) ? a : b;
  }
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
