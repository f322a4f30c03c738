// exp of one float for the density-adaptive small-cache schedule's per-entry softmax steps
// (schedules/sparse_small_cache), computed in double precision from one 64-byte line of
// constants.
//
// Why not std::exp: glibc's expf reads its table and constants from about five lines of libm's
// data. The density-adaptive forward calls exp once or twice per mask entry, and at M = d^2 / 8,
// where its tiles are a few dozen lines, those lines beside them overflowed an LRU cache of twice
// the model's M (docs/io_model.md, "Against a cache simulator"). Why not the flash kernels' float
// polynomial (exp_lanes, with its constants in one line too): without FMA in the baseline target
// it ran the schedule 1.1x to 1.3x slower than expf; in double precision the polynomial needs no
// error-compensating steps.
//
// Method: x = n ln 2 + r with n = round(x / ln 2), so |r| <= ln 2 / 2; exp(x) = 2^n exp(r),
// exp(r) from its degree-8 Taylor polynomial (truncation below 2.0e-10 relative) and 2^n put into
// the exponent field. The double result rounds once to float: within 0.502 ulp of the exact value
// for every float argument (tests/oracle/flash_kernels_test.cpp sweeps them). Exactly 0 at -inf
// and below -104 (expf is 0 from -103.98 on), exactly 1 at 0, +inf above 88.8, NaN for NaN.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace spattn::schedules::scalar_exp_detail {

// Floats where a float's bits suffice (the coefficients' rounding changes the result by under
// 1e-9 relative), so that all of them fit one line.
struct alignas(64) ScalarExpConstants {
  double ln2;              // n ln 2 rounds by at most 1e-14 for the n used: no Cody-Waite split
  float lo;                // below it the float result is 0
  float hi;                // above it the float result is +inf
  float round;             // 1.5 * 2^52: adding and subtracting it rounds a double to an integer
  float inv_ln2;           // 1 / ln 2
  float one;               // read from this line like the rest, not from the constant pool
  float inv_factorial[7];  // 1 / k!, k = 2..8
};
static_assert(sizeof(ScalarExpConstants) == 64, "one 64-byte line");

// Defined in scalar_exp.cpp, so that every caller reads this line rather than literals the
// compiler would scatter over its constant pool.
extern const ScalarExpConstants kScalarExpConstants;

}  // namespace spattn::schedules::scalar_exp_detail

namespace spattn::schedules {

inline float scalar_exp(float x) {
  const auto& c = scalar_exp_detail::kScalarExpConstants;
  if (x < c.lo) return 0.0f;
  if (x > c.hi) return std::numeric_limits<float>::infinity();
  const double xd = x;
  // t holds round(x / ln 2) in its low mantissa bits; n is that integer (NaN gives NaN below).
  const double round = c.round;
  const double t = xd * c.inv_ln2 + round;
  uint64_t t_bits;
  std::memcpy(&t_bits, &t, sizeof t_bits);
  const auto n = static_cast<int32_t>(static_cast<uint32_t>(t_bits));
  const double n_d = t - round;
  const double r = xd - n_d * c.ln2;
  // 1 + r + r^2/2! + ... + r^8/8! by Estrin's scheme: a dependency chain of six steps where
  // Horner's has sixteen (this runs once or twice per mask entry).
  const float* k = c.inv_factorial;  // k[i] = 1 / (i + 2)!
  const double r2 = r * r;
  const double r4 = r2 * r2;
  const double low = (c.one + r) + r2 * (k[0] + r * k[1]);
  const double high = (k[2] + r * k[3]) + r2 * (k[4] + r * k[5]) + r4 * k[6];
  const double poly = low + r4 * high;
  // 2^n in a double's exponent field; n lies in [-150, 128] here.
  const uint64_t scale_bits = static_cast<uint64_t>(int64_t{1023} + n) << 52;
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return static_cast<float>(scale * poly);
}

}  // namespace spattn::schedules
