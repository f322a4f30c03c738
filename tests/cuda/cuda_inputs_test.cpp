// What the CUDA backend does to its inputs on the host, run on the CPU (no GPU needed): the mask
// CSR's transpose for cuSPARSE, shape validation and the 16-bit conversions. The tile math, tiles
// and tile lists: cuda_tile_math_test.cpp.
#include "device/device_tiles.hpp"

#include <spattn/cuda.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace {

using spattn::Mask;
using ::testing::HasSubstr;

// ---- the mask's CSR for cuSPARSE -----------------------------------------------------------

TEST(CudaCsr, TransposeAndPermutationMatchABruteForceTranspose) {
  for (const char* spec : {"random:p=0.15,seed=3", "causal", "bigbird:block=8,seed=1"}) {
    SCOPED_TRACE(spec);
    const Mask mask = Mask::from_spec(spec, 57, 91);
    const auto csr = spattn::device::csr32(mask, "mask");
    const auto t = spattn::device::csr32_transpose(csr);
    ASSERT_EQ(t.num_rows, 91);
    ASSERT_EQ(t.num_cols, 57);
    ASSERT_EQ(t.col.size(), csr.col.size());
    ASSERT_GT(csr.col.size(), 0u);
    // value of (i, j) in the original = i * 1000 + j; the transpose's permuted values must be its own
    // (row j, column i) entries.
    std::vector<int64_t> values(csr.col.size());
    for (int64_t i = 0; i < csr.num_rows; ++i)
      for (int32_t p = csr.row_ptr[i]; p < csr.row_ptr[i + 1]; ++p) values[p] = i * 1000 + csr.col[p];
    for (int64_t j = 0; j < t.num_rows; ++j) {
      for (int32_t p = t.row_ptr[j]; p < t.row_ptr[j + 1]; ++p) {
        EXPECT_EQ(values[static_cast<size_t>(t.perm[p])], int64_t{t.col[p]} * 1000 + j);
        if (p > t.row_ptr[j]) {
          EXPECT_LT(t.col[p - 1], t.col[p]);
        }
      }
    }
  }
}

// Every form gives the pairs of its int64 CSR, and the compact forms give them without expanding
// one (memory_bytes() would count it); past int32 it is refused before anything is built.
TEST(CudaCsr, EveryMaskFormGivesItsPairsWithoutAnInt64Csr) {
  const std::vector<std::pair<Mask, spattn::MaskForm>> masks = {
      {Mask::from_spec("causal", 57, 91), spattn::MaskForm::intervals},
      {Mask::from_spec("bigbird:block=8,seed=1", 57, 91), spattn::MaskForm::blocks},
      {Mask::from_spec("random:p=0.15,seed=3", 57, 91), spattn::MaskForm::elements},
      {Mask::full(57, 91), spattn::MaskForm::full},
      {Mask::from_spec("sliding_window:w=1", 7, 7), spattn::MaskForm::intervals}};
  for (const auto& [mask, form] : masks) {
    SCOPED_TRACE(spattn::form_name(form));
    ASSERT_EQ(mask.form(), form);
    mask.row_intervals();  // a block mask's rows as intervals, built on first use as for any schedule
    const int64_t bytes = mask.memory_bytes();
    const auto csr = spattn::device::csr32(mask, "mask");
    EXPECT_EQ(mask.memory_bytes(), bytes);
    const auto expected = mask.csr();
    ASSERT_GT(expected.nnz(), 0);
    ASSERT_EQ(csr.num_rows, expected.num_rows);
    ASSERT_EQ(csr.num_cols, expected.num_cols);
    ASSERT_EQ(csr.row_ptr.size(), static_cast<size_t>(expected.num_rows + 1));
    ASSERT_EQ(csr.col.size(), static_cast<size_t>(expected.nnz()));
    for (int64_t i = 0; i <= expected.num_rows; ++i) EXPECT_EQ(csr.row_ptr[static_cast<size_t>(i)], expected.row_ptr[i]);
    for (int64_t p = 0; p < expected.nnz(); ++p) EXPECT_EQ(csr.col[static_cast<size_t>(p)], expected.col_idx[p]);
  }
  try {
    spattn::device::csr32(Mask::from_spec("causal", 100000, 100000), "cuda small_cache: mask");
    FAIL() << "a mask of 5e9 pairs fits int32";
  } catch (const spattn::InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda small_cache: mask"));
    EXPECT_THAT(e.what(), HasSubstr("5000050000 attended pairs"));
  }
}

// ---- shapes ----------------------------------------------------------------------------------

spattn::device::ViewInfo view(std::array<int64_t, 4> shape) {
  static const float dummy = 0.0f;
  return {&dummy, shape};
}

TEST(CudaShapes, MismatchesNameTheArgumentAndTheValues) {
  const std::vector<Mask> one{Mask::full(7, 9)};
  auto forward = [&](std::array<int64_t, 4> q, std::array<int64_t, 4> k, std::array<int64_t, 4> o,
                     const std::vector<Mask>& masks) {
    return spattn::device::check_forward("f", view(q), view(k), view({2, 2, 9, 16}), view(o),
                                         view({2, 4, 7, 1}), masks);
  };
  const auto s = forward({2, 4, 7, 8}, {2, 2, 9, 8}, {2, 4, 7, 16}, one);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.kv_heads, 2);
  EXPECT_EQ(s.head_dim_v, 16);
  auto message = [&](auto&& call) {
    try {
      call();
    } catch (const spattn::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message([&] { forward({2, 4, 7, 8}, {2, 2, 9, 6}, {2, 4, 7, 16}, one); }),
              HasSubstr("k is (2, 2, 9, 6), expected (2, 2, 9, 8)"));
  EXPECT_THAT(message([&] { forward({2, 3, 7, 8}, {2, 2, 9, 8}, {2, 3, 7, 16}, one); }),
              HasSubstr("q has 3 heads, not a multiple of k's 2 heads"));
  EXPECT_THAT(message([&] { forward({2, 4, 7, 8}, {2, 2, 9, 8}, {2, 4, 7, 15}, one); }),
              HasSubstr("o is (2, 4, 7, 15)"));
  EXPECT_THAT(message([&] { forward({2, 4, 7, 8}, {2, 2, 9, 8}, {2, 4, 7, 16}, {Mask::full(7, 9), Mask::full(7, 9)}); }),
              HasSubstr("2 masks given"));
  EXPECT_THAT(message([&] { forward({2, 4, 7, 8}, {2, 2, 9, 8}, {2, 4, 7, 16}, {Mask::full(9, 7)}); }),
              HasSubstr("mask 0 is 9 x 7"));
  EXPECT_THAT(message([&] {
                spattn::device::check_forward("f", {nullptr, {2, 4, 7, 8}}, view({2, 2, 9, 8}), view({2, 2, 9, 16}),
                                              view({2, 4, 7, 16}), view({2, 4, 7, 1}), one);
              }),
              HasSubstr("q has no data but 448 elements"));
  EXPECT_THAT(message([&] { spattn::device::resolve_scale("f", std::numeric_limits<double>::infinity(), 8); }),
              HasSubstr("scale = inf must be finite"));
  EXPECT_FLOAT_EQ(spattn::device::resolve_scale("f", std::nullopt, 64), 0.125f);
}

// ---- 16-bit conversions ----------------------------------------------------------------------

float bits_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(CudaElements, HalfConversionRoundsToNearestEven) {
  using spattn::cuda::to_float;
  using spattn::cuda::to_half;
  EXPECT_EQ(to_half(1.0f).bits, 0x3c00);
  EXPECT_EQ(to_half(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_half(65504.0f).bits, 0x7bff);
  EXPECT_EQ(to_half(65519.0f).bits, 0x7bff);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7c00);          // the tie rounds to even: infinity
  EXPECT_EQ(to_half(std::ldexp(1.0f, -24)).bits, 0x0001);
  EXPECT_EQ(to_half(std::ldexp(1.0f, -25)).bits, 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(to_half(std::ldexp(1.5f, -25)).bits, 0x0001);
  EXPECT_EQ(to_half(std::ldexp(3.0f, -25)).bits, 0x0002);  // tie between 1 and 2 units: even
  EXPECT_EQ(to_half(1.0f + std::ldexp(1.0f, -11)).bits, 0x3c00);      // tie: even
  EXPECT_EQ(to_half(1.0f + 3 * std::ldexp(1.0f, -11)).bits, 0x3c02);  // tie: even (up)
  EXPECT_EQ(to_half(-0.0f).bits, 0x8000);
  EXPECT_EQ(to_half(INFINITY).bits, 0x7c00);
  EXPECT_TRUE(std::isnan(to_float(to_half(NAN))));
  EXPECT_EQ(to_half(std::ldexp(1.0f, -14)).bits, 0x0400);  // smallest normal
  EXPECT_EQ(to_half(std::ldexp(1023.5f, -24)).bits, 0x0400);  // subnormal rounding up into the normals
  for (uint32_t b = 0; b < 0x10000; ++b) {
    spattn::cuda::half_t h;
    h.bits = static_cast<uint16_t>(b);
    const float f = to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_half(f).bits, b) << "half " << b;
  }
}

TEST(CudaElements, Bfloat16ConversionRoundsToNearestEven) {
  using spattn::cuda::to_bfloat16;
  using spattn::cuda::to_float;
  EXPECT_EQ(to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bfloat16(1.0f + std::ldexp(1.0f, -8)).bits, 0x3f80);      // tie: even
  EXPECT_EQ(to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)).bits, 0x3f82);  // tie: even (up)
  EXPECT_EQ(to_bfloat16(bits_float(0x3f80c000)).bits, 0x3f81);           // above the tie
  EXPECT_EQ(to_bfloat16(bits_float(0x7f7fffff)).bits, 0x7f80);           // rounds to infinity
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(NAN))));
  for (uint32_t b = 0; b < 0x10000; ++b) {
    spattn::cuda::bfloat16_t h;
    h.bits = static_cast<uint16_t>(b);
    const float f = to_float(h);
    if (std::isnan(f)) continue;
    ASSERT_EQ(to_bfloat16(f).bits, b) << "bfloat16 " << b;
  }
}

}  // namespace
