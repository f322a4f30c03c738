// The public API over sparse masks: every algorithm agrees with the fp64 reference on the pattern
// library, the ledger equals the plan's prediction, and the prepared Mask validates its input.
#include <spattn/attention.hpp>
#include <spattn/reference.hpp>

#include "support/compare.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::TensorView;
using spattn::testing::random_floats;

namespace {

struct Case {
  std::string spec;
  int64_t seqlen_q, seqlen_k;
};

}  // namespace

TEST(AttentionMask, EveryAlgorithmMatchesTheReferenceAndItsPlanOnThePatternLibrary) {
  const std::vector<Case> cases = {
      {"causal", 97, 97},
      {"sliding_window:w=5", 97, 97},
      {"bigbird:block=8,w=1,g=1,r=2,seed=3", 97, 97},
      {"documents:lengths=20/50/27,causal=1", 97, 97},
      {"random:p=0.05,seed=2", 97, 97},
      {"random:p=0.02,seed=5", 33, 61},  // rectangular, with empty rows
      {"sliding_window:w=0", 7, 7},      // the diagonal only
  };
  const int64_t d = 8, heads = 2;
  for (const Case& c : cases) {
    const Mask mask = Mask::from_spec(c.spec, c.seqlen_q, c.seqlen_k);
    const auto nq = static_cast<size_t>(heads * c.seqlen_q * d), nk = static_cast<size_t>(heads * c.seqlen_k * d);
    const auto q = random_floats(nq, 1), k = random_floats(nk, 2), v = random_floats(nk, 3);
    const auto d_o = random_floats(nq, 4);
    auto in = [&](const std::vector<float>& x, int64_t n) { return TensorView<const float>::contiguous(x.data(), 1, heads, n, d); };
    // The fp64 reference on the same mask.
    auto wide = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    const auto qd = wide(q), kd = wide(k), vd = wide(v), dod = wide(d_o);
    auto dv_ = [&](const std::vector<double>& x, int64_t n) { return TensorView<const double>::contiguous(x.data(), 1, heads, n, d); };
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const auto ref_f = spattn::reference::forward<int64_t>(dv_(qd, c.seqlen_q), dv_(kd, c.seqlen_k), dv_(vd, c.seqlen_k), {mask.csr()}, scale);
    const auto ref_b = spattn::reference::backward<int64_t>(dv_(qd, c.seqlen_q), dv_(kd, c.seqlen_k), dv_(vd, c.seqlen_k),
                                                            dv_(dod, c.seqlen_q), {mask.csr()}, scale);
    const double tolerance = spattn::testing::fp32_tolerance(d + c.seqlen_k, 1.0);
    for (Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache}) {
      for (int64_t m : {int64_t{120}, int64_t{4096}}) {
        SCOPED_TRACE(c.spec + " " + spattn::algorithm_name(algorithm) + " M " + std::to_string(m));
        std::vector<float> o(nq), lse(static_cast<size_t>(heads * c.seqlen_q)), dq(nq), dk(nk), dv(nk);
        AttentionOptions options;
        options.algorithm = algorithm;
        options.cache_words = m;
        spattn::io::Ledger forward_ledger, backward_ledger;
        options.ledger = &forward_ledger;
        const auto fp = spattn::attention_forward(in(q, c.seqlen_q), in(k, c.seqlen_k), in(v, c.seqlen_k),
                                                  TensorView<float>::contiguous(o.data(), 1, heads, c.seqlen_q, d),
                                                  TensorView<float>::contiguous(lse.data(), 1, heads, c.seqlen_q, 1), mask, options);
        options.ledger = &backward_ledger;
        const auto bp = spattn::attention_backward(
            in(q, c.seqlen_q), in(k, c.seqlen_k), in(v, c.seqlen_k), in(o, c.seqlen_q),
            TensorView<const float>::contiguous(lse.data(), 1, heads, c.seqlen_q, 1), in(d_o, c.seqlen_q),
            TensorView<float>::contiguous(dq.data(), 1, heads, c.seqlen_q, d),
            TensorView<float>::contiguous(dk.data(), 1, heads, c.seqlen_k, d),
            TensorView<float>::contiguous(dv.data(), 1, heads, c.seqlen_k, d), mask, options);
        EXPECT_LE(spattn::testing::max_abs_error(o, ref_f.o), tolerance);
        EXPECT_LE(spattn::testing::max_abs_error(lse, ref_f.lse), tolerance);
        EXPECT_LE(spattn::testing::max_abs_error(dq, ref_b.dq), tolerance);
        EXPECT_LE(spattn::testing::max_abs_error(dk, ref_b.dk), tolerance);
        EXPECT_LE(spattn::testing::max_abs_error(dv, ref_b.dv), tolerance);
        EXPECT_EQ(forward_ledger.reads(), fp.reads);
        EXPECT_EQ(forward_ledger.writes(), fp.writes);
        EXPECT_EQ(backward_ledger.reads(), bp.reads);
        EXPECT_EQ(backward_ledger.writes(), bp.writes);
        EXPECT_LE(backward_ledger.peak_resident(), m);
        EXPECT_TRUE(fp.masked);
        EXPECT_GT(backward_ledger.total(spattn::io::WordKind::index).reads, 0);
      }
    }
  }
}

TEST(AttentionMask, AFullMaskRunsTheDenseSchedules) {
  const Mask full = Mask::from_spec("full", 16, 16);
  EXPECT_TRUE(full.is_full());
  EXPECT_EQ(full.nnz(), 256);
  const auto plan = spattn::plan_heads({16, 16, 4, 4}, full, spattn::Pass::forward, {512});
  EXPECT_FALSE(plan.masked);
  EXPECT_EQ(plan.flash.index_words, 0);
  // A CSR that happens to cover everything is recognized as full too.
  const Mask causal_of_one = Mask::from_spec("causal", 1, 1);
  EXPECT_TRUE(causal_of_one.is_full());
}

TEST(AttentionMask, BadMasksAreRejectedWithTheirName) {
  std::vector<int32_t> row_ptr{0, 2, 1}, col_idx{0, 1};
  const sparse_formats::CsrPatternView<int32_t> decreasing{2, 2, row_ptr.data(), col_idx.data()};
  try {
    Mask::from_csr(decreasing, "layer3.mask");
    FAIL();
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("layer3.mask"), std::string::npos) << error.what();
  }
  EXPECT_THROW(Mask::from_spec("sliding_window:w=-1", 4, 4), spattn::InvalidArgument);
  // A mask of the wrong shape for the tensors.
  std::vector<float> x(4 * 2, 0.5f), o(8), lse(4);
  const Mask wrong = Mask::from_spec("causal", 5, 5);
  try {
    spattn::attention_forward(TensorView<const float>::matrix(x.data(), 4, 2), TensorView<const float>::matrix(x.data(), 4, 2),
                              TensorView<const float>::matrix(x.data(), 4, 2), TensorView<float>::matrix(o.data(), 4, 2),
                              TensorView<float>::matrix(lse.data(), 4, 1), wrong, AttentionOptions{});
    FAIL();
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("mask is 5 x 5"), std::string::npos) << error.what();
  }
}
