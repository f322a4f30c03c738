// The flash kernels' accumulating product (flash_kernels_accumulate.hpp) has two orders of the same
// sums: streamed (the inner rows held in registers, the accumulator rows streamed past them) and
// register-held (a block of the accumulator held in registers over every inner row). Both add
// acc alpha first, rounded, and then the inner rows in order, so they must agree bit for bit, with
// and without the forward's rescaling, on full tiles and on partial ones whose blocks of inner
// rows skip the outer rows they do not attend; and both must be the product an fp64 sum gives.
// Compiled here at 4 lanes (GCC / Clang vector types, the baseline instruction set).
#include "cpu/kernels/flash_kernels_isa.hpp"

#define SPATTN_KERNEL_NAMESPACE kernels_under_test
#include "cpu/kernels/flash_kernels_impl.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

namespace k = spattn::schedules::flash_kernels::kernels_under_test;

#if defined(__GNUC__)
using Lanes = k::Lanes4;
#else
using Lanes = k::Lanes1;
#endif
using Streamed = k::Config<Lanes, 12, 12, 0, 0>;
using Held3x2 = k::Config<Lanes, 12, 12, 3, 2>;
using Held6x2 = k::Config<Lanes, 12, 12, 6, 2>;
using Held1x1 = k::Config<Lanes, 12, 12, 1, 1>;

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
  EXPECT_NE(k::attended_ranges(bits.data(), rows_i, rows_i, rows_o, x.ranges.data()), nullptr);
  return x;
}

template <typename Cfg>
std::vector<float> accumulate(const Operands& x, bool rescale) {
  std::vector<float> acc = x.acc;
  k::accumulate_product<Cfg>(acc.data(), x.rows_o, x.cols, x.w.data(), x.rows_o, x.rows_i, x.b.data(),
                             rescale ? x.alpha.data() : nullptr, x.ranges.empty() ? nullptr : x.ranges.data());
  return acc;
}

TEST(FlashAccumulate, HeldAndStreamedOrdersAgreeBitForBitAndWithAnFp64Sum) {
  uint32_t seed = 1;
  int64_t compared = 0;
  for (const int64_t rows_i : {9, 16, 23, 64}) {
    for (const int64_t rows_o : {1, 5, 13, 64}) {
      for (const int64_t cols : {1, 7, 8, 40, 64}) {
        for (const bool partial : {false, true}) {
          for (const bool rescale : {false, true}) {
            if (partial && rescale) continue;  // the forward's rescaling never comes with ranges
            SCOPED_TRACE("rows_i " + std::to_string(rows_i) + " rows_o " + std::to_string(rows_o) + " cols " +
                         std::to_string(cols) + (partial ? " partial" : " full") + (rescale ? " rescaled" : ""));
            const Operands x = operands(rows_o, rows_i, cols, partial, seed++);
            const std::vector<float> streamed = accumulate<Streamed>(x, rescale);
            const std::vector<std::vector<float>> held = {accumulate<Held3x2>(x, rescale),
                                                          accumulate<Held6x2>(x, rescale),
                                                          accumulate<Held1x1>(x, rescale)};
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
                for (const std::vector<float>& h : held) ASSERT_EQ(h[at], streamed[at]) << "element " << o << ", " << c;
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
