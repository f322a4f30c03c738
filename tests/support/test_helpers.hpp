// Small helpers shared by the schedule tests: error-message checks, seeded inputs, growth
// exponents, and whether this is a sanitized build (which runs the same checks on fewer sizes).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spattn::testing {

// Under AddressSanitizer (a Debug build) every one-word move costs ~70x more.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

// The what() of the Error that f throws, or "<no error>".
template <typename Error, typename F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.what();
  }
  return "<no error>";
}

inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// `count` floats uniform in [-1, 1), the same for the same seed.
inline std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = uniform(engine);
  return values;
}

inline std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

// Least-squares slope of log(y) against log(x): the exponent of a measured growth.
inline double log_log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += std::log(x[i]);
    my += std::log(y[i]);
  }
  mx /= static_cast<double>(x.size());
  my /= static_cast<double>(y.size());
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (std::log(x[i]) - mx) * (std::log(y[i]) - my);
    sxx += (std::log(x[i]) - mx) * (std::log(x[i]) - mx);
  }
  return sxy / sxx;
}

}  // namespace spattn::testing
