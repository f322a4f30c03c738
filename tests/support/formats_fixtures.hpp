// Shared helpers of the sparse_formats tests: error-message checks, deterministic random
// matrices, and field-by-field comparisons of the format structs.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <sparse_formats/bsr.hpp>
#include <sparse_formats/csr.hpp>
#include <sparse_formats/error.hpp>
#include <string>
#include <vector>

namespace formats_testing {

// Succeeds iff body() throws sparse_formats::FormatError whose message contains every part.
template <typename Body>
::testing::AssertionResult throws_with(Body&& body, std::initializer_list<std::string> parts) {
  try {
    body();
  } catch (const sparse_formats::FormatError& error) {
    const std::string message = error.what();
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& other) {
    return ::testing::AssertionFailure() << "threw something else: " << other.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

// Peak resident memory of this process so far (ctest runs each test in its own process).
inline int64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
}

// body must throw a FormatError containing every part, having grown the peak memory by less than
// 64 MiB: a refused header must cost what reading it costs, not what it declares (GBs below).
inline void expect_cheap_refusal(const std::function<void()>& body, std::initializer_list<std::string> parts) {
  const int64_t rss_before = peak_rss_bytes();
  EXPECT_TRUE(throws_with(body, parts));
  EXPECT_LT(peak_rss_bytes() - rss_before, int64_t{64} << 20);
}

// A uniform double in [0, 1) from the top 53 bits, the same on every standard library (unlike
// std::uniform_real_distribution).
inline double unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

enum class Shape { random, causal, block_dense };

// A row-major 0/1 mask. random: each element with probability `density`; causal: c <= r with
// random holes in every fifth row (so diagonal and some below-diagonal blocks are partial);
// block_dense: dense 6 x 10 tiles on a checkerboard-like grid plus random sprinkles, which makes
// full blocks at many block sizes.
inline std::vector<uint8_t> make_mask(int64_t rows, int64_t cols, Shape shape, double density,
                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> mask(static_cast<size_t>(rows * cols), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      bool set = false;
      const double u = unit(rng);
      switch (shape) {
        case Shape::random:
          set = u < density;
          break;
        case Shape::causal:
          set = c <= r && (r % 5 != 0 || u < 0.5);
          break;
        case Shape::block_dense:
          set = (r / 6 + c / 10) % 3 == 0 || u < density;
          break;
      }
      mask[static_cast<size_t>(r * cols + c)] = set ? 1 : 0;
    }
  }
  return mask;
}

// Values in {-4, ..., 4} \ {0} where the mask is set, else 0: exact in float, so round trips
// compare with ==.
template <typename Value>
std::vector<Value> make_values(const std::vector<uint8_t>& mask, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Value> values(mask.size(), Value{0});
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] == 0) continue;
    const int64_t v = static_cast<int64_t>(rng() % 8) - 4;
    values[i] = static_cast<Value>(v >= 0 ? v + 1 : v);
  }
  return values;
}

template <typename Index>
void expect_same(const sparse_formats::CsrPattern<Index>& a,
                 const sparse_formats::CsrPattern<Index>& b) {
  EXPECT_EQ(a.num_rows, b.num_rows);
  EXPECT_EQ(a.num_cols, b.num_cols);
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.col_idx, b.col_idx);
}

template <typename Index>
void expect_same(const sparse_formats::BsrPattern<Index>& a,
                 const sparse_formats::BsrPattern<Index>& b) {
  EXPECT_EQ(a.num_rows, b.num_rows);
  EXPECT_EQ(a.num_cols, b.num_cols);
  EXPECT_EQ(a.block_m, b.block_m);
  EXPECT_EQ(a.block_n, b.block_n);
  EXPECT_EQ(a.block_row_ptr, b.block_row_ptr);
  EXPECT_EQ(a.block_col_idx, b.block_col_idx);
}

template <typename Index>
void expect_same(const sparse_formats::BsrMask<Index>& a, const sparse_formats::BsrMask<Index>& b) {
  expect_same(a.blocks, b.blocks);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.partial_slot, b.partial_slot);
  EXPECT_EQ(a.partial_bits, b.partial_bits);
}

}  // namespace formats_testing
