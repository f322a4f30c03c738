// Comparing fp32 results to the fp64 reference, with tolerances derived from float epsilon and
// the problem size rather than tuned by hand.
//
// The rule (documented in docs/io_model.md): a fp32 result r of a quantity whose fp64 value is x,
// computed as sums of `terms` products, may differ from x by at most
//     tolerance = 8 * eps_f32 * terms * max(1, max|x|)
// (a naive fp32 dot product of length m has worst-case relative error about m * eps; the factor
// 8 covers the softmax's exp/log and the two chained products of attention). Attention outputs
// use terms = head_dim + seqlen_k: the score dot products have head_dim terms, the P V products
// seqlen_k.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace spattn::testing {

inline double fp32_tolerance(int64_t terms, double magnitude) {
  return 8.0 * static_cast<double>(FLT_EPSILON) * static_cast<double>(std::max<int64_t>(terms, 1)) *
         std::max(1.0, magnitude);
}

inline double max_abs(const std::vector<double>& values) {
  double m = 0.0;
  for (double v : values) {
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

// Largest |actual - expected|; infinities must match exactly (e.g. lse = -inf of an empty row),
// and any NaN makes the error infinite.
template <typename T>
double max_abs_error(const std::vector<T>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]);
    const double e = expected[i];
    if (std::isnan(a) || std::isnan(e)) return std::numeric_limits<double>::infinity();
    if (std::isinf(a) || std::isinf(e)) {
      if (a != e) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(a - e));
  }
  return worst;
}

// Bit for bit equal (the sign of zero, infinities and NaN payloads included): what a native run
// must give against a counted one, a rerun against the first, or a team against one worker.
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace spattn::testing
