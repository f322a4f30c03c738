// The constants of the kernels' exp (exp_lanes, flash_kernels_lanes.hpp) and the -inf of masked
// scores, in one struct of one 64-byte line.
//
// Why a struct: the flash vector steps take them as literals (kExpConstants, folded into their
// code), but flash's scalar steps (flash_kernels_scalar.hpp) and small_cache's row passes
// (small_cache_kernels_impl.hpp) read them from kExpConstantsLine, whose initializer no kernel
// translation unit sees. As literals the compiler scatters them over five to seven lines of its
// constant pool; those steps run at the smallest M, where those lines beside tiles of a few dozen
// lines overflowed an LRU cache of twice the model's M (docs/io_model.md, "Against a cache
// simulator").
#pragma once

#include <limits>

namespace spattn::schedules::flash_kernels {

struct alignas(64) ExpConstants {
  float lo;            // below it exp is 0 (and the argument is clamped to it)
  float hi;            // the argument is clamped to it from above
  float round;         // 1.5 * 2^23: adding and subtracting it rounds to an integer
  float log2e;         // 1 / ln 2
  float ln2_hi;        // ln 2 = ln2_hi + ln2_lo, ln2_hi exact in few bits (Cody-Waite)
  float ln2_lo;
  float poly[6];       // exp(r) = 1 + r + r^2 (poly[0] r^5 + ... + poly[5]), highest degree first
  float one;
  float neg_inf;       // a masked score; a row maximum or LSE that attends nothing
};

inline constexpr ExpConstants kExpConstants{
    -87.0f,
    88.0f,
    12582912.0f,
    1.44269504088896341f,
    0.693359375f,
    -2.12194440e-4f,
    {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f,
     5.0000001201e-1f},
    1.0f,
    -std::numeric_limits<float>::infinity()};

// The same values in memory (defined in flash_kernels.cpp), for flash's scalar steps and
// small_cache's row passes.
extern const ExpConstants kExpConstantsLine;

}  // namespace spattn::schedules::flash_kernels
