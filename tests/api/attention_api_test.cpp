// The public attention entry points: batch x heads, strided views, counted == planned, native ==
// counted, and validation that names the argument before anything is written.
#include <spattn/attention.hpp>
#include <spattn/reference.hpp>

#include <sparse_formats/patterns.hpp>

#include "support/compare.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::TensorView;
using spattn::testing::random_floats;

namespace {

struct Problem {
  int64_t batch = 2, heads = 3, n = 19, d = 8;
  std::vector<float> q, k, v, d_o, o, lse, dq, dk, dv;
  Problem() {
    const auto size = static_cast<size_t>(batch * heads * n * d);
    q = random_floats(size, 1);
    k = random_floats(size, 2);
    v = random_floats(size, 3);
    d_o = random_floats(size, 4);
    o.assign(size, 0.0f);
    lse.assign(static_cast<size_t>(batch * heads * n), 0.0f);
    dq.assign(size, 0.0f);
    dk.assign(size, 0.0f);
    dv.assign(size, 0.0f);
  }
  TensorView<const float> in(const std::vector<float>& x) const {
    return TensorView<const float>::contiguous(x.data(), batch, heads, n, d);
  }
  TensorView<float> out(std::vector<float>& x, int64_t last = -1) const {
    return TensorView<float>::contiguous(x.data(), batch, heads, n, last < 0 ? d : last);
  }
  spattn::Plan forward(const AttentionOptions& options) {
    return spattn::attention_forward(in(q), in(k), in(v), out(o), out(lse, 1), {}, options);
  }
  spattn::Plan backward(const AttentionOptions& options) {
    return spattn::attention_backward(in(q), in(k), in(v), in(o), TensorView<const float>::contiguous(lse.data(), batch, heads, n, 1),
                                      in(d_o), out(dq), out(dk), out(dv), {}, options);
  }
};

struct Expected {
  spattn::reference::ForwardResult forward;
  spattn::reference::BackwardResult backward;
};

Expected reference(const Problem& p) {
  auto wide = [&](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  const auto q = wide(p.q), k = wide(p.k), v = wide(p.v), d_o = wide(p.d_o);
  auto view = [&](const std::vector<double>& x) {
    return TensorView<const double>::contiguous(x.data(), p.batch, p.heads, p.n, p.d);
  };
  const auto mask = sparse_formats::full_pattern<int32_t>(p.n, p.n);
  const spattn::reference::MaskList<int32_t> masks{mask.view()};
  const double scale = 1.0 / std::sqrt(static_cast<double>(p.d));
  return {spattn::reference::forward(view(q), view(k), view(v), masks, scale),
          spattn::reference::backward(view(q), view(k), view(v), view(d_o), masks, scale)};
}

}  // namespace

TEST(AttentionApi, EveryAlgorithmMatchesTheReferenceOverBatchAndHeads) {
  Problem base;
  const Expected expected = reference(base);
  const double tolerance = spattn::testing::fp32_tolerance(base.d + base.n, 1.0);
  for (Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache, Algorithm::reference}) {
    for (int64_t m : {int64_t{64}, int64_t{1024}}) {
      if (algorithm == Algorithm::flash && m < 3 * 8 + 3 * 8 + 3) continue;
      SCOPED_TRACE(std::string(spattn::algorithm_name(algorithm)) + " M " + std::to_string(m));
      Problem p;
      AttentionOptions options;
      options.algorithm = algorithm;
      options.cache_words = m;
      spattn::io::Ledger forward_ledger, backward_ledger;
      if (algorithm != Algorithm::reference) options.ledger = &forward_ledger;
      const auto forward_plan = p.forward(options);
      if (algorithm != Algorithm::reference) options.ledger = &backward_ledger;
      const auto backward_plan = p.backward(options);
      EXPECT_LE(spattn::testing::max_abs_error(p.o, expected.forward.o), tolerance);
      EXPECT_LE(spattn::testing::max_abs_error(p.lse, expected.forward.lse), tolerance);
      EXPECT_LE(spattn::testing::max_abs_error(p.dq, expected.backward.dq), tolerance);
      EXPECT_LE(spattn::testing::max_abs_error(p.dk, expected.backward.dk), tolerance);
      EXPECT_LE(spattn::testing::max_abs_error(p.dv, expected.backward.dv), tolerance);
      EXPECT_GT(spattn::testing::max_abs(std::vector<double>(p.dk.begin(), p.dk.end())), 1e-3);
      if (algorithm != Algorithm::reference) {
        // The plan speaks for all batch x heads problems, and the ledger agrees with it exactly.
        EXPECT_EQ(forward_plan.num_heads, 6);
        EXPECT_EQ(forward_ledger.reads(), forward_plan.reads);
        EXPECT_EQ(forward_ledger.writes(), forward_plan.writes);
        EXPECT_EQ(backward_ledger.reads(), backward_plan.reads);
        EXPECT_EQ(backward_ledger.writes(), backward_plan.writes);
        EXPECT_LE(backward_ledger.peak_resident(), m);
      }
    }
  }
}

TEST(AttentionApi, NativeRunsGiveTheSameBitsAsCountedRuns) {
  Problem counted, native;
  AttentionOptions options;
  options.cache_words = 512;
  spattn::io::Ledger ledger;
  options.ledger = &ledger;
  counted.forward(options);
  counted.backward(options);
  options.ledger = nullptr;
  native.forward(options);
  native.backward(options);
  EXPECT_EQ(counted.o, native.o);
  EXPECT_EQ(counted.dq, native.dq);
  EXPECT_EQ(counted.dk, native.dk);
  EXPECT_EQ(counted.dv, native.dv);
}

TEST(AttentionApi, StridedViewsAreRead) {
  // q laid out as (batch, seqlen, heads, head_dim), as many model codes store it.
  Problem p;
  const Expected expected = reference(p);
  std::vector<float> q_bshd(p.q.size());
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h)
      for (int64_t s = 0; s < p.n; ++s)
        for (int64_t c = 0; c < p.d; ++c)
          q_bshd[static_cast<size_t>(((b * p.n + s) * p.heads + h) * p.d + c)] =
              p.q[static_cast<size_t>(((b * p.heads + h) * p.n + s) * p.d + c)];
  const TensorView<const float> q{q_bshd.data(), {p.batch, p.heads, p.n, p.d},
                                  {p.n * p.heads * p.d, p.d, p.heads * p.d, 1}};
  AttentionOptions options;
  options.cache_words = 2048;
  spattn::attention_forward(q, p.in(p.k), p.in(p.v), p.out(p.o), p.out(p.lse, 1), {}, options);
  EXPECT_LE(spattn::testing::max_abs_error(p.o, expected.forward.o),
            spattn::testing::fp32_tolerance(p.d + p.n, 1.0));
}

TEST(AttentionApi, DefaultCacheSizeIsPositiveAndUsed) {
  EXPECT_GT(spattn::default_cache_words(), 0);
  Problem p;
  const auto plan = p.forward(AttentionOptions{});
  EXPECT_EQ(plan.cache_words, spattn::default_cache_words());
}

TEST(AttentionApi, ValidationNamesTheArgumentAndWritesNothing) {
  Problem p;
  std::vector<float> short_lse(3, 7.0f);
  auto expect_error = [&](auto call, const std::string& fragment) {
    const auto o_before = p.o;
    try {
      call();
      ADD_FAILURE() << "expected an error containing " << fragment;
    } catch (const spattn::InvalidArgument& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
    EXPECT_EQ(p.o, o_before);
  };
  AttentionOptions options;
  expect_error([&] {
    spattn::attention_forward(p.in(p.q), p.in(p.k), p.in(p.v), p.out(p.o),
                              TensorView<float>::contiguous(short_lse.data(), 1, 1, 3, 1), {}, options);
  }, "attention_forward: lse has batch 1, q has 2");
  expect_error([&] {
    const auto k = TensorView<const float>::contiguous(p.k.data(), p.batch, p.heads, p.n, p.d - 1);
    spattn::attention_forward(p.in(p.q), k, p.in(p.v), p.out(p.o), p.out(p.lse, 1), {}, options);
  }, "k has head_dim 7, q has 8");
  expect_error([&] {
    const auto k = TensorView<const float>::contiguous(p.k.data(), p.batch, 2, p.n, p.d);
    spattn::attention_forward(p.in(p.q), k, k, p.out(p.o), p.out(p.lse, 1), {}, options);
  }, "attention_forward: q has 3 heads, not a multiple of k's 2 heads");
  AttentionOptions bad_scale;
  bad_scale.scale = std::nan("");
  expect_error([&] { p.forward(bad_scale); }, "scale");
  AttentionOptions bad_cache;
  bad_cache.cache_words = -1;
  expect_error([&] { p.forward(bad_cache); }, "cache_words = -1");
  AttentionOptions too_small;
  too_small.cache_words = 20;
  too_small.algorithm = Algorithm::flash;
  expect_error([&] { p.forward(too_small); }, "needs M >=");
  expect_error([&] {
    spattn::attention_backward(p.in(p.q), p.in(p.k), p.in(p.v), p.in(p.o),
                               TensorView<const float>::contiguous(p.lse.data(), p.batch, p.heads, p.n, 1), p.in(p.d_o),
                               p.out(p.dq), TensorView<float>::contiguous(p.dk.data(), p.batch, p.heads, p.n - 1, p.d),
                               p.out(p.dv), {}, options);
  }, "dk has extent 18 in dimension 2, its input has 19");
}
