// The public sparse-input entry points (sparse_inputs.hpp): CSR Q, K, V through attention_forward /
// attention_backward with every algorithm, against the fp64 reference; the outputs bit for bit
// those of the densified inputs; the counted words equal the plan's prediction, with index words
// booked to the inputs; the plan's Z_input is (nnz(Q) + nnz(K)) / 2 and its bound the sparse one;
// a flash run is bit-identical for any thread count; bad inputs are clear errors naming them.
// Many heads (MultiHeadInputs): sparse_inputs_api_heads_test.cpp.
#include <spattn/attention.hpp>
#include <spattn/bounds.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>
#include <spattn/sparse_inputs.hpp>

#include "support/compare.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/sparse_inputs_runs.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

using namespace spattn;
using spattn::testing::contains;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::message_of;
using spattn::testing::SparseInput;
using spattn::testing::expect_counted_with_input_indices;
using spattn::testing::expect_same_outputs;
using spattn::testing::sparse_input;

using Outputs = spattn::testing::RunOutputs;

class Problem {
 public:
  Problem(int64_t m, int64_t n, int64_t d, int64_t e, double density)
      : m_(m), n_(n), d_(d), e_(e),
        q_(sparse_input(m, d, density, 31, 2, 2.0f)),
        k_(sparse_input(n, d, density, 32, 0)),
        v_(sparse_input(n, e, density, 33)),
        d_o_(spattn::testing::random_floats(m * e, 34)) {}

  AttentionInputs inputs(bool csr) const {
    const auto in = [&](const SparseInput& x) {
      return csr ? AttentionInput::csr(x.csr.view())
                 : AttentionInput::dense(TensorView<const float>::matrix(x.dense.data(), x.csr.num_rows(), x.csr.num_cols()));
    };
    return {in(q_), in(k_), in(v_)};
  }

  Outputs run(const AttentionInputs& in, const HeadMasks& mask, AttentionOptions options) const {
    Outputs out;
    out.o.assign(static_cast<size_t>(m_ * e_), 7.0f);
    out.lse.assign(static_cast<size_t>(m_), 7.0f);
    out.dq.assign(static_cast<size_t>(m_ * d_), 7.0f);
    out.dk.assign(static_cast<size_t>(n_ * d_), 7.0f);
    out.dv.assign(static_cast<size_t>(n_ * e_), 7.0f);
    options.ledger = &out.forward_ledger;
    out.forward_plan = attention_forward(in, TensorView<float>::matrix(out.o.data(), m_, e_),
                                         TensorView<float>::matrix(out.lse.data(), m_, 1), mask, options);
    options.ledger = &out.backward_ledger;
    out.backward_plan = attention_backward(
        in, TensorView<const float>::matrix(out.o.data(), m_, e_), TensorView<const float>::matrix(out.lse.data(), m_, 1),
        TensorView<const float>::matrix(d_o_.data(), m_, e_), TensorView<float>::matrix(out.dq.data(), m_, d_),
        TensorView<float>::matrix(out.dk.data(), n_, d_), TensorView<float>::matrix(out.dv.data(), n_, e_), mask, options);
    return out;
  }

  // The fp64 reference on the CSR inputs (reference.hpp's CSR overloads).
  std::pair<reference::ForwardResult, reference::BackwardResult> expected(const Mask& mask, double scale) const {
    std::vector<std::vector<double>> values;
    const auto tensor = [&](const SparseInput& x) {
      values.emplace_back(x.csr.values.begin(), x.csr.values.end());
      return reference::CsrTensor<int64_t>{1, 1, {{x.csr.pattern.view(), values.back().data()}}};
    };
    values.reserve(3);
    const auto q = tensor(q_), k = tensor(k_), v = tensor(v_);
    const std::vector<double> d_o(d_o_.begin(), d_o_.end());
    const auto d_o_view = TensorView<const double>::matrix(d_o.data(), m_, e_);
    return {reference::forward<int64_t>(q, k, v, {mask.csr()}, scale),
            reference::backward<int64_t>(q, k, v, d_o_view, {mask.csr()}, scale)};
  }

  int64_t nnz_q() const { return q_.csr.nnz(); }
  int64_t nnz_k() const { return k_.csr.nnz(); }
  int64_t m_, n_, d_, e_;

 private:
  SparseInput q_, k_, v_;
  std::vector<float> d_o_;
};

TEST(SparseInputsApi, EveryAlgorithmAgreesWithTheReferenceAndItsPlan) {
  for (const char* spec : {"full", "causal", "random:p=0.3,seed=2"}) {
    for (const int64_t n : {7, 97}) {
      const Problem p(n, n, 8, 6, 0.35);
      const Mask mask = spec == std::string("full") ? Mask::full(n, n) : Mask::from_spec(spec, n, n);
      AttentionOptions options;
      options.scale = 0.4;
      options.threads = 1;
      const auto want = p.expected(mask, 0.4);
      for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache, Algorithm::automatic, Algorithm::reference}) {
        for (const int64_t cache_words : {int64_t{200}, int64_t{2000}}) {
          SCOPED_TRACE(::testing::Message() << spec << " n " << n << " " << algorithm_name(algorithm) << " M " << cache_words);
          options.algorithm = algorithm;
          options.cache_words = cache_words;
          const Outputs got = p.run(p.inputs(true), mask, options);
          const int64_t fwd_terms = p.d_ + n, bwd_terms = p.d_ + p.e_ + 2 * n;
          EXPECT_LE(max_abs_error(got.o, want.first.o), fp32_tolerance(fwd_terms, max_abs(want.first.o)));
          EXPECT_LE(max_abs_error(got.lse, want.first.lse), fp32_tolerance(fwd_terms, max_abs(want.first.lse)));
          EXPECT_LE(max_abs_error(got.dq, want.second.dq), fp32_tolerance(bwd_terms, max_abs(want.second.dq)));
          EXPECT_LE(max_abs_error(got.dk, want.second.dk), fp32_tolerance(bwd_terms, max_abs(want.second.dk)));
          EXPECT_LE(max_abs_error(got.dv, want.second.dv), fp32_tolerance(bwd_terms, max_abs(want.second.dv)));
          if (algorithm == Algorithm::reference) continue;
          expect_counted_with_input_indices(got.forward_plan, got.forward_ledger);
          expect_counted_with_input_indices(got.backward_plan, got.backward_ledger);
          // The same algorithm on the densified inputs: the same bits.
          options.algorithm = got.forward_plan.algorithm;
          const Outputs dense = p.run(p.inputs(false), mask, options);
          expect_same_outputs(got, dense);
          EXPECT_EQ(dense.forward_ledger.total(io::WordKind::index).total(),
                    mask.is_full() ? 0 : dense.forward_ledger.traffic(io::Operand::mask, io::WordKind::index).reads);
        }
      }
    }
  }
}

TEST(SparseInputsApi, PlanUsesTheNonzerosForZInputAndTheSparseBound) {
  const Problem p(64, 64, 16, 16, 0.1);
  const Mask mask = Mask::from_spec("sliding_window:w=8", 64, 64);
  const Plan plan = plan_attention(p.inputs(true), mask, Pass::forward, spattn::testing::planning_options(1024));
  const double z_input = 0.5 * static_cast<double>(p.nnz_q() + p.nnz_k());
  EXPECT_EQ(plan.z_input, z_input);
  EXPECT_LT(plan.z_input, 0.5 * 64 * 16);  // far below the dense n d = 1024
  EXPECT_EQ(plan.z_qk, mask.nnz());
  const auto bound = bounds::sparse(z_input, static_cast<double>(mask.nnz()), 1024.0);
  EXPECT_EQ(plan.bound.value, bound.value);
  EXPECT_EQ(plan.theoretical_switch, z_input * z_input / static_cast<double>(mask.nnz()));
  EXPECT_TRUE(plan.masked);
  EXPECT_NE(plan.to_string().find("Z_input = (nnz(Q) + nnz(K)) / 2 = " + std::to_string(static_cast<int64_t>(z_input))),
            std::string::npos)
      << plan.to_string();
  // A full mask with sparse inputs takes the sparse bound too, with Z_QK = n^2.
  const Plan full =
      plan_attention(p.inputs(true), Mask::full(64, 64), Pass::backward, spattn::testing::planning_options(1024));
  EXPECT_EQ(full.z_qk, 64 * 64);
  EXPECT_EQ(full.bound.value, bounds::sparse(z_input, 64.0 * 64.0, 1024.0).value);
  // Dense inputs through this API: the plan of attention.hpp, unchanged.
  const Plan dense = plan_attention(p.inputs(false), mask, Pass::forward, spattn::testing::planning_options(1024));
  const Plan direct = plan_heads(bounds::DenseShape{64, 64, 16, 16}, mask, Pass::forward, {1024});
  EXPECT_EQ(dense.total(), direct.total());
  EXPECT_EQ(dense.z_input, direct.z_input);
  // Sparse inputs move fewer words than dense ones at 10% density.
  EXPECT_LT(plan.total(), dense.total());
}

TEST(SparseInputsApi, FlashIsBitIdenticalForAnyThreadCount) {
  const Problem p(97, 97, 16, 16, 0.3);
  const Mask mask = Mask::from_spec("causal", 97, 97);
  AttentionOptions options;
  options.algorithm = Algorithm::flash;
  options.cache_words = 2048;
  options.threads = 1;
  const Outputs one = p.run(p.inputs(true), mask, options);
  options.threads = 3;
  const Outputs three = p.run(p.inputs(true), mask, options);
  expect_same_outputs(one, three);
  EXPECT_EQ(one.backward_ledger.reads(), three.backward_ledger.reads());
}

TEST(SparseInputsApi, NoMaskRunsAndPreviewsWhatTheFullMaskDoes) {
  for (const auto& [m, n] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {13, 9}}) {
    SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n));
    const Problem p(m, n, 8, 5, 0.4);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
      const AttentionOptions options = spattn::testing::planning_options(algorithm == Algorithm::flash ? 900 : 200, algorithm);
      const Outputs none = p.run(p.inputs(true), {}, options);
      const Outputs full = p.run(p.inputs(true), Mask::full(m, n), options);
      expect_same_outputs(none, full);
      EXPECT_TRUE(std::any_of(none.dv.begin(), none.dv.end(), [](float x) { return x != 0.0f; }));  // non-trivial
      EXPECT_EQ(none.backward_ledger.reads(), full.backward_ledger.reads());
      EXPECT_TRUE(none.backward_plan == full.backward_plan);
      EXPECT_TRUE(plan_attention(p.inputs(true), {}, Pass::backward, options) == none.backward_plan);
    }
  }
}

TEST(SparseInputsApi, BadInputsAreClearErrorsNamingTheArgument) {
  const Problem p(8, 8, 4, 4, 0.5);
  const Mask mask = Mask::full(8, 8);
  std::vector<float> o(32), lse(8);
  const auto forward = [&](const AttentionInputs& in) {
    return message_of<InvalidArgument>([&] {
      attention_forward(in, TensorView<float>::matrix(o.data(), 8, 4), TensorView<float>::matrix(lse.data(), 8, 1), mask,
                        AttentionOptions{});
    });
  };
  std::vector<int64_t> ptr{0, 2, 2, 2, 2, 2, 2, 2, 2}, unsorted{3, 1}, out_of_range{1, 4};
  std::vector<float> values{1.0f, 2.0f};
  AttentionInputs in = p.inputs(true);
  in.q = AttentionInput::csr({{8, 4, ptr.data(), unsorted.data()}, values.data()});
  EXPECT_TRUE(contains(forward(in), "attention_forward (sparse inputs): q"));
  EXPECT_TRUE(contains(forward(in), "col_idx[1] = 1"));
  in.q = AttentionInput::csr({{8, 4, ptr.data(), out_of_range.data()}, values.data()});
  EXPECT_TRUE(contains(forward(in), "out of range [0, 4)"));
  in = p.inputs(true);
  std::vector<int64_t> narrow{0, 2};
  in.k = AttentionInput::csr({{8, 3, ptr.data(), narrow.data()}, values.data()});
  EXPECT_TRUE(contains(forward(in), "k has head_dim 3, q has 4"));
  in = p.inputs(true);
  std::vector<int64_t> short_ptr{0, 2, 2, 2, 2, 2, 2, 2}, sorted{1, 3};
  in.v = AttentionInput::csr({{7, 4, short_ptr.data(), sorted.data()}, values.data()});
  EXPECT_TRUE(contains(forward(in), "v has seqlen 7, k has 8"));
  in = p.inputs(true);
  std::vector<float> inf{1.0f, INFINITY};
  in.v = AttentionInput::csr({{8, 4, ptr.data(), sorted.data()}, inf.data()});
  EXPECT_TRUE(contains(forward(in), "v.values[1] = inf is not finite"));
  // An output of the wrong shape.
  EXPECT_TRUE(contains(message_of<InvalidArgument>([&] {
                         attention_forward(p.inputs(true), TensorView<float>::matrix(o.data(), 8, 3),
                                           TensorView<float>::matrix(lse.data(), 8, 1), mask, AttentionOptions{});
                       }),
                       "o is 8 x 3, expected seqlen_q x head_dim_v = 8 x 4"));
}

}  // namespace
