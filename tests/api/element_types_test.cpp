// float16 and bfloat16 through the CPU API: the conversions round to nearest even on every path,
// a one-key case checkable by hand, FlashAttention's rule (within 2x the naive 16-bit computation's
// error against fp64) over patterns, odd sizes, head dims, grouped-query heads, empty rows and
// rectangular masks for flash, small_cache and auto; counted == predicted in words and in lines of
// 32 16-bit words; identical bits for any thread count; non-finite 16-bit inputs refused by name.
#include "support/half_precision.hpp"
#include "support/half_precision_cpu.hpp"

#include <spattn/attention.hpp>
#include <spattn/io.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace spattn::testing::half_precision;
using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::bfloat16_t;
using spattn::half_t;
using spattn::Mask;
using spattn::Plan;
using spattn::TensorView;

float float_of(uint32_t bits) {
  float x = 0.0f;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// Floats that exercise rounding: random ones over many binades, ties, fp16 subnormals and
// overflow, zeros and infinities.
std::vector<float> rounding_cases() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65520.0f, 1e6f, -1e-7f, 6e-8f, 3e-8f,
                               float_of(0x3f808000u), float_of(0x3f818000u), float_of(0x3f800001u),
                               INFINITY, -INFINITY};
  std::mt19937 engine(7);
  std::uniform_int_distribution<uint32_t> any_bits(0, 0xffffffffu);
  for (int i = 0; i < 2000; ++i) {
    const float x = float_of(any_bits(engine));
    if (std::isfinite(x)) values.push_back(x);
  }
  for (uint32_t bits = 0x33000000u; bits < 0x39000000u; bits += 0x00081013u) values.push_back(float_of(bits));
  return values;
}

template <typename T>
void expect_conversions_round_to_nearest_even() {
  const spattn::io::Storage storage = spattn::io::storage_of<T>;
  const std::vector<float> values = rounding_cases();
  for (int64_t stride : {1, 3}) {
    // Every length up to 37 (the vector loops' 8 lanes and their tails), then all values at once.
    for (int64_t count : {0, 1, 7, 8, 9, 16, 37, static_cast<int>(values.size())}) {
      SCOPED_TRACE("stride " + std::to_string(stride) + ", count " + std::to_string(count));
      std::vector<uint16_t> narrow(static_cast<size_t>(count * stride), 0xdeadu);
      spattn::io::narrow_16bit(storage, values.data(), count, narrow.data(), stride);
      std::vector<float> wide(static_cast<size_t>(count), NAN);
      spattn::io::widen_16bit(storage, narrow.data(), stride, count, wide.data());
      for (int64_t i = 0; i < count; ++i) {
        const T expected = spattn::from_float<T>(values[static_cast<size_t>(i)]);
        ASSERT_EQ(narrow[static_cast<size_t>(i * stride)], expected.bits) << "value " << values[static_cast<size_t>(i)];
        const float widened = spattn::to_float(expected);
        ASSERT_EQ(std::memcmp(&wide[static_cast<size_t>(i)], &widened, sizeof widened), 0);
      }
    }
  }
}

TEST(ElementTypes, ConversionsRoundToNearestEvenOnEveryPath) {
  expect_conversions_round_to_nearest_even<half_t>();
  expect_conversions_round_to_nearest_even<bfloat16_t>();
  // By hand: bf16 keeps 7 mantissa bits. 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 and rounds
  // to the even one, 1; 1 + 3 * 2^-8 halfway between 1 + 2^-7 and 1 + 2^-6 rounds to 1 + 2^-6.
  const float ties[] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  uint16_t out[2] = {0, 0};
  spattn::io::narrow_16bit(spattn::io::Storage::bf16, ties, 2, out, 1);
  EXPECT_EQ(out[0], 0x3f80u);
  EXPECT_EQ(out[1], 0x3f82u);
}

template <typename T>
void expect_one_key_gives_its_value() {
  // One query, one key: P = 1, so O = V exactly (V is representable), LSE = scale q.k, dV = dO,
  // and dS = P (dP - D) = dO.V - dO.O = 0, so dQ = dK = 0.
  Problem p = make_problem(1, 1, 1, 1, 1, 4, 4, 5);
  p.q = {0.5f, -1.0f, 0.25f, 2.0f};
  p.k = {1.0f, 0.5f, -2.0f, 0.125f};
  p.v = {3.0f, -0.75f, 0.0f, 1.5f};
  p.d_o = {1.0f, 2.0f, -1.0f, 0.5f};
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::reference}) {
    SCOPED_TRACE(spattn::algorithm_name(algorithm));
    const Outputs out = run_cpu<T>(p, {Mask::full(1, 1)}, options_for(algorithm));
    EXPECT_EQ(out.o, p.v);
    EXPECT_FLOAT_EQ(out.lse[0], 0.5f * (0.5f - 0.5f - 0.5f + 0.25f));  // scale 1/sqrt(4), q.k = -0.25
    EXPECT_EQ(out.dv, p.d_o);
    EXPECT_EQ(out.dq, std::vector<float>(4, 0.0f));
    EXPECT_EQ(out.dk, std::vector<float>(4, 0.0f));
  }
}

TEST(ElementTypes, OneKeyGivesItsValueExactly) {
  expect_one_key_gives_its_value<half_t>();
  expect_one_key_gives_its_value<bfloat16_t>();
}

struct Case {
  int64_t heads, kv_heads, n_q, n_k, d;
  std::string spec;
};

std::vector<Case> cases() {
  std::vector<Case> list;
  const char* specs[] = {"full", "causal", "sliding_window:w=5", "random:p=0.2,seed=3",
                         "bigbird:block=8,w=1,g=1,r=2,seed=3", "documents:causal=1,num_docs="};
  const std::pair<int64_t, int64_t> sizes[] = {{1, 40}, {7, 64}, {97, 111}, {257, 128}};
  for (const std::string spec : specs) {
    for (const auto& [n, d] : sizes) {
      // Three documents, or one a token where there are fewer tokens.
      list.push_back({1, 1, n, n, d, spec.back() == '=' ? spec + std::to_string(std::min<int64_t>(3, n)) : spec});
    }
  }
  list.push_back({4, 2, 97, 97, 40, "causal"});                // grouped-query heads
  list.push_back({3, 1, 33, 41, 64, "sliding_window:w=5"});    // multi-query, rectangular
  list.push_back({2, 2, 41, 33, 40, "causal"});                // bottom-right causal: 8 empty rows
  list.push_back({2, 2, 97, 97, 64, "random:p=0.02,seed=9"});  // rows with no key
  return list;
}

template <typename T>
void expect_within_twice_the_naive_error() {
  for (const Case& c : cases()) {
    const Problem p = rounded<T>(make_problem(1, c.heads, c.kv_heads, c.n_q, c.n_k, c.d, c.d, 11));
    const std::vector<Mask> masks = {Mask::from_spec(c.spec, c.n_q, c.n_k)};
    const float scale = static_cast<float>(scale_of(p));
    const Truth t = truth(p, masks, scale);
    const Outputs lazy = naive<T>(p, masks, scale);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic}) {
      SCOPED_TRACE(c.spec + ", " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                   " heads, " + std::to_string(c.n_q) + " x " + std::to_string(c.n_k) + ", d " + std::to_string(c.d) +
                   ", " + spattn::algorithm_name(algorithm));
      Plan forward, backward;
      const Outputs out = run_cpu<T>(p, masks, options_for(algorithm), &forward, &backward);
      expect_half_precision_rule(p, masks, out, lazy, t);
    }
  }
}

TEST(ElementTypes, Float16IsWithinTwiceTheNaiveErrorAndCountsWhatItPredicts) {
  expect_within_twice_the_naive_error<half_t>();
}
TEST(ElementTypes, Bfloat16IsWithinTwiceTheNaiveErrorAndCountsWhatItPredicts) {
  expect_within_twice_the_naive_error<bfloat16_t>();
}

template <typename T>
void expect_same_bits_for_any_thread_count() {
  const Problem p = make_problem(1, 4, 2, 97, 97, 64, 64, 3);
  const std::vector<Mask> masks = {Mask::from_spec("causal", 97, 97)};
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    const Outputs one = run_cpu<T>(p, masks, options_for(algorithm, 1));
    for (int threads : {2, 3}) {
      const Outputs more = run_cpu<T>(p, masks, options_for(algorithm, threads));
      EXPECT_TRUE(spattn::testing::same_bits(one.o, more.o) && spattn::testing::same_bits(one.lse, more.lse) &&
                  spattn::testing::same_bits(one.dq, more.dq) && spattn::testing::same_bits(one.dk, more.dk) &&
                  spattn::testing::same_bits(one.dv, more.dv))
          << spattn::algorithm_name(algorithm) << ", " << threads << " threads";
    }
  }
}

TEST(ElementTypes, TheBitsAreTheSameForAnyThreadCount) {
  expect_same_bits_for_any_thread_count<half_t>();
  expect_same_bits_for_any_thread_count<bfloat16_t>();
}

TEST(ElementTypes, TheDefaultLineIs64BytesOfTheCallsElements) {
  spattn::AttentionShape shape;
  shape.seqlen_q = shape.seqlen_k = 64;
  shape.head_dim = 64;
  const Mask causal = Mask::from_spec("causal", 64, 64);
  EXPECT_EQ(spattn::plan_attention(shape, causal, spattn::Pass::backward).line_words, 16);
  shape.element = spattn::ElementType::bf16;
  EXPECT_EQ(spattn::plan_attention(shape, causal, spattn::Pass::backward).line_words, 32);
  shape.element = spattn::ElementType::fp16;
  EXPECT_EQ(spattn::plan_attention(shape, causal, spattn::Pass::backward).line_words, 32);
  // A call's plan is its preview's.
  const Problem p = make_problem(1, 1, 1, 64, 64, 64, 64, 2);
  const std::vector<bfloat16_t> q = to_elements<bfloat16_t>(p.q);
  std::vector<bfloat16_t> o(q.size());
  std::vector<float> lse(64);
  const auto view = TensorView<const bfloat16_t>::matrix(q.data(), 64, 64);
  const Plan ran = spattn::attention_forward(view, view, view, TensorView<bfloat16_t>::matrix(o.data(), 64, 64),
                                             TensorView<float>::matrix(lse.data(), 64, 1), causal);
  EXPECT_EQ(ran, spattn::plan_attention(shape, causal, spattn::Pass::forward));
}

TEST(ElementTypes, NonFinite16BitInputsAreRefusedByName) {
  std::vector<bfloat16_t> q(8 * 4, spattn::to_bfloat16(0.5f)), o(8 * 4);
  std::vector<float> lse(8);
  q[3 * 4 + 1].bits = 0x7fc0;  // NaN
  const auto qv = TensorView<const bfloat16_t>::matrix(q.data(), 8, 4);
  std::vector<bfloat16_t> k(q.size(), spattn::to_bfloat16(0.25f));
  const auto kv = TensorView<const bfloat16_t>::matrix(k.data(), 8, 4);
  try {
    spattn::attention_forward(kv, qv, kv, TensorView<bfloat16_t>::matrix(o.data(), 8, 4),
                              TensorView<float>::matrix(lse.data(), 8, 1));
    ADD_FAILURE() << "a NaN key ran";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("attention_forward: k[0, 0, 3, 1] = nan is not finite"),
              std::string::npos)
        << error.what();
  }
  EXPECT_TRUE(std::all_of(o.begin(), o.end(), [](bfloat16_t x) { return x.bits == 0; })) << "o was written";
  // An fp16 infinity in dO, in the backward.
  std::vector<half_t> h(8 * 4, spattn::to_half(0.5f)), d_o(h), grads(3 * h.size());
  d_o[5].bits = 0x7c00;
  const auto hv = TensorView<const half_t>::matrix(h.data(), 8, 4);
  auto grad = [&](int i) { return TensorView<half_t>::matrix(grads.data() + i * 32, 8, 4); };
  try {
    spattn::attention_backward(hv, hv, hv, hv, TensorView<const float>::matrix(lse.data(), 8, 1),
                               TensorView<const half_t>::matrix(d_o.data(), 8, 4), grad(0), grad(1), grad(2));
    ADD_FAILURE() << "an infinite dO ran";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("attention_backward: d_o[0, 0, 1, 1] = inf is not finite"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
