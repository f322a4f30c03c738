// The flash kernels' accumulating product (flash_kernels_accumulate.hpp) has two orders of the same
// sums: streamed (the inner rows held in registers, the accumulator rows streamed past them) and
// register-held (a block of the accumulator held in registers over every inner row). Both add
// acc alpha first, rounded, and then the inner rows in order, so they must agree bit for bit, with
// and without the forward's rescaling, on full tiles and on partial ones whose blocks of inner
// rows skip the outer rows they do not attend; and both must be the product an fp64 sum gives.
// Compiled here for AVX2 + FMA at 8 lanes on x86-64 with GCC or Clang (where a multiply and an add
// may fuse, which is what could tell the orders apart; the test skips on a CPU without them), else
// for the baseline instruction set at one lane.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#define SPATTN_TEST_WITH_FMA 1
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#endif

#define SPATTN_KERNEL_NAMESPACE kernels_under_test
#include "cpu/kernels/flash_kernels_impl.hpp"

namespace k = spattn::schedules::flash_kernels::kernels_under_test;

namespace {

#if defined(SPATTN_TEST_WITH_FMA)
using Lanes = k::Lanes8;
#else
using Lanes = k::Lanes1;
#endif
using Streamed = k::Config<Lanes, 12, 12, 0, 0>;
using Held3x2 = k::Config<Lanes, 12, 12, 3, 2>;
using Held6x2 = k::Config<Lanes, 12, 12, 6, 2>;
using Held1x1 = k::Config<Lanes, 12, 12, 1, 1>;
constexpr int kOrders = 4;  // streamed, then the three held blocks

// The products under test, compiled for the target above and called only after the CPU check:
// out[j] (rows_o, cols) = acc alpha + w^T b in order j. Out of line, so that no code of this target
// is inlined into the test's own.
SPATTN_KERNEL_OUTLINE void accumulate_in_every_order(int64_t rows_o, int64_t rows_i, int64_t cols, const float* w,
                                                     const float* b, const float* alpha, const k::RowRange* ranges,
                                                     float* const* out) {
  k::accumulate_product<Streamed>(out[0], rows_o, cols, w, rows_o, rows_i, b, alpha, ranges);
  k::accumulate_product<Held3x2>(out[1], rows_o, cols, w, rows_o, rows_i, b, alpha, ranges);
  k::accumulate_product<Held6x2>(out[2], rows_o, cols, w, rows_o, rows_i, b, alpha, ranges);
  k::accumulate_product<Held1x1>(out[3], rows_o, cols, w, rows_o, rows_i, b, alpha, ranges);
}

SPATTN_KERNEL_OUTLINE bool attended_ranges_of(const uint64_t* bits, int64_t rows_i, int64_t rows_o,
                                              k::RowRange* ranges) {
  return k::attended_ranges(bits, rows_i, rows_i, rows_o, ranges) != nullptr;
}

}  // namespace

#if defined(SPATTN_TEST_WITH_FMA)
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

namespace {

struct Operands {
  int64_t rows_o, rows_i, cols;
  std::vector<float> w, b, acc, alpha;
  std::vector<k::RowRange> ranges;  // empty: a full tile
};

// A tile whose weights w (rows_i, rows_o) are 0 where a band mask leaves a pair out, as the steps'
// apply_bits leaves them, with the ranges attended_ranges derives from the same bits.
Operands operands(int64_t rows_o, int64_t rows_i, int64_t cols, bool partial, uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  Operands x{rows_o, rows_i, cols, {}, {}, {}, {}, {}};
  x.w.resize(static_cast<size_t>(rows_i * rows_o));
  x.b.resize(static_cast<size_t>(rows_i * cols));
  x.acc.resize(static_cast<size_t>(rows_o * cols));
  x.alpha.resize(static_cast<size_t>(rows_o));
  for (float& v : x.w) v = normal(random);
  for (float& v : x.b) v = normal(random);
  for (float& v : x.acc) v = normal(random);
  for (float& v : x.alpha) v = std::exp(normal(random));
  if (!partial) return x;
  // Outer row o attends inner rows within 5 of o * rows_i / rows_o (a diagonal band).
  std::vector<uint64_t> bits(static_cast<size_t>((rows_o * rows_i + 63) / 64 + 1), 0);
  for (int64_t o = 0; o < rows_o; ++o) {
    const int64_t centre = o * rows_i / rows_o;
    for (int64_t i = 0; i < rows_i; ++i) {
      const int64_t bit = o * rows_i + i;
      if (std::llabs(i - centre) <= 5) {
        bits[static_cast<size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
      } else {
        x.w[static_cast<size_t>(i * rows_o + o)] = 0.0f;
      }
    }
  }
  x.ranges.resize(k::kMaxRangeBlocks);
  EXPECT_TRUE(attended_ranges_of(bits.data(), rows_i, rows_o, x.ranges.data()));
  return x;
}

// Every order's result, streamed first.
std::vector<std::vector<float>> accumulate(const Operands& x, bool rescale) {
  std::vector<std::vector<float>> results(kOrders, x.acc);
  float* out[kOrders];
  for (int j = 0; j < kOrders; ++j) out[j] = results[static_cast<size_t>(j)].data();
  accumulate_in_every_order(x.rows_o, x.rows_i, x.cols, x.w.data(), x.b.data(), rescale ? x.alpha.data() : nullptr,
                            x.ranges.empty() ? nullptr : x.ranges.data(), out);
  return results;
}

TEST(FlashAccumulate, HeldAndStreamedOrdersAgreeBitForBitAndWithAnFp64Sum) {
#if defined(SPATTN_TEST_WITH_FMA)
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    GTEST_SKIP() << "this CPU has no AVX2 + FMA, for which the products are compiled here";
  }
#endif
  uint32_t seed = 1;
  int64_t compared = 0;
  for (const int64_t rows_i : {9, 16, 23, 64}) {
    for (const int64_t rows_o : {1, 5, 13, 64}) {
      for (const int64_t cols : {1, 7, 8, 40, 43, 64}) {
        for (const bool partial : {false, true}) {
          for (const bool rescale : {false, true}) {
            if (partial && rescale) continue;  // the forward's rescaling never comes with ranges
            SCOPED_TRACE("rows_i " + std::to_string(rows_i) + " rows_o " + std::to_string(rows_o) + " cols " +
                         std::to_string(cols) + (partial ? " partial" : " full") + (rescale ? " rescaled" : ""));
            const Operands x = operands(rows_o, rows_i, cols, partial, seed++);
            const std::vector<std::vector<float>> orders = accumulate(x, rescale);
            const std::vector<float>& streamed = orders[0];
            bool changed = false;
            for (int64_t o = 0; o < rows_o; ++o) {
              for (int64_t c = 0; c < cols; ++c) {
                const size_t at = static_cast<size_t>(o * cols + c);
                double sum = static_cast<double>(x.acc[at]) * (rescale ? x.alpha[static_cast<size_t>(o)] : 1.0f);
                double magnitude = std::fabs(sum);
                for (int64_t i = 0; i < rows_i; ++i) {
                  const double term = static_cast<double>(x.w[static_cast<size_t>(i * rows_o + o)]) *
                                      x.b[static_cast<size_t>(i * cols + c)];
                  sum += term;
                  magnitude += std::fabs(term);
                }
                ASSERT_NEAR(streamed[at], sum, 1e-6 * magnitude) << "element " << o << ", " << c;
                for (int j = 1; j < kOrders; ++j) {
                  ASSERT_EQ(orders[static_cast<size_t>(j)][at], streamed[at]) << "order " << j << ", element " << o << ", " << c;
                }
                changed = changed || streamed[at] != x.acc[at];
                ++compared;
              }
            }
            EXPECT_TRUE(changed);
          }
        }
      }
    }
  }
  EXPECT_GT(compared, 10000);
}

}  // namespace
