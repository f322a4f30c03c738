// The CUDA backend against the CPU backend's fp64 reference (spattn::reference, the oracle every
// CPU schedule is tested against), fp32 inputs: both device algorithms (block-sparse flash, cuSPARSE
// small_cache), forward and backward, seqlens 1, 97, 257 and rectangular shapes, every pattern of
// the library, head_dim 32, 64, 128, grouped-query attention, per-head masks, strided views, a small
// shared-memory budget (many partial tiles), empty masks, determinism; within the fp32 tolerance
// rule of tests/support/compare.hpp. fp16 / bf16: cuda_half_precision_test.cpp.
// Skips, with the reason, where no CUDA device is usable.
#include "cuda_attention_support.hpp"

#include <string>
#include <utility>

namespace {

using namespace spattn::testing::cuda_attention;

void expect_fp32_match(const Problem& p, const std::vector<Mask>& masks, const spattn::cuda::Options& options,
                       bool layout_bshd = false) {
  const Truth t = truth(p, masks, scale_of(p));
  const DeviceOut out = run_device<float>(p, masks, options, layout_bshd);
  const int64_t forward_terms = p.d + p.n_k;
  const int64_t backward_terms = std::max(p.d, p.e) + std::max(p.n_q, p.n_k) * (p.heads / p.kv_heads);
  EXPECT_LE(max_abs_error(out.o, t.fwd.o), fp32_tolerance(forward_terms, max_abs(t.fwd.o)));
  EXPECT_LE(max_abs_error(out.lse, t.fwd.lse), fp32_tolerance(forward_terms, max_abs(t.fwd.lse)));
  EXPECT_LE(max_abs_error(out.dq, t.bwd.dq), fp32_tolerance(backward_terms, max_abs(t.bwd.dq)));
  EXPECT_LE(max_abs_error(out.dk, t.bwd.dk), fp32_tolerance(backward_terms, max_abs(t.bwd.dk)));
  EXPECT_LE(max_abs_error(out.dv, t.bwd.dv), fp32_tolerance(backward_terms, max_abs(t.bwd.dv)));
  bool attends = false;
  for (const Mask& mask : masks) attends = attends || mask.nnz() > 0;
  if (attends) {  // non-trivial outputs
    EXPECT_GT(max_abs(t.fwd.o), 0.0);
    EXPECT_GT(max_abs(t.bwd.dv), 0.0);
  }
}

TEST_F(CudaAttention, Fp32MatchesTheReferenceOnEveryPatternAndShape) {
  struct Shape {
    int64_t n_q, n_k, d, e;
  };
  const Shape shapes[] = {{1, 1, 32, 32}, {97, 97, 64, 64}, {97, 257, 32, 32}, {257, 97, 32, 64}, {257, 257, 32, 32}};
  for (const Shape& s : shapes) {
    const Problem p = make_problem(1, 2, 2, s.n_q, s.n_k, s.d, s.e, static_cast<uint64_t>(s.n_q * 1000 + s.n_k));
    std::vector<std::string> specs = spattn::testing::cuda_pattern_specs(s.n_q, s.n_k);
    specs.push_back("full");
    for (const std::string& spec : specs) {
      const Mask mask = spec == "full" ? Mask::full(s.n_q, s.n_k) : spattn::testing::mask_of(spec, s.n_q, s.n_k);
      for (const CudaAlgorithm algorithm : algorithms()) {
        SCOPED_TRACE(label(spec, p, algorithm));
        expect_fp32_match(p, {mask}, options_for(algorithm));
      }
    }
  }
}

TEST_F(CudaAttention, HeadDim128AndASmallSharedMemoryBudget) {
  const Problem p = make_problem(1, 2, 2, 257, 257, 128, 128, 128);
  for (const std::string spec : {"sliding_window:w=16", "bigbird:block=16,w=1,g=1,r=2,seed=3", "random:p=0.1,seed=2", "full"}) {
    const Mask mask = spec == "full" ? Mask::full(257, 257) : Mask::from_spec(spec, 257, 257);
    for (const int64_t smem : {int64_t{0}, int64_t{48 * 1024}}) {
      SCOPED_TRACE(label(spec, p, CudaAlgorithm::flash) + ", shared memory " + std::to_string(smem));
      expect_fp32_match(p, {mask}, options_for(CudaAlgorithm::flash, smem));
    }
    if (tested(CudaAlgorithm::small_cache)) {
      SCOPED_TRACE(label(spec, p, CudaAlgorithm::small_cache));
      expect_fp32_match(p, {mask}, options_for(CudaAlgorithm::small_cache));
    }
  }
  // 12 KiB: the d = 64 tiles become a few rows, most of a window's tiles are partial.
  const Problem small = make_problem(1, 1, 1, 257, 257, 64, 64, 64);
  SCOPED_TRACE("12 KiB");
  expect_fp32_match(small, {Mask::from_spec("sliding_window:w=20,causal=1", 257, 257)},
                    options_for(CudaAlgorithm::flash, 12 * 1024));
}

TEST_F(CudaAttention, GroupedQueryAttentionPerHeadMasksAndStridedViews) {
  const Problem p = make_problem(2, 4, 2, 97, 131, 32, 32, 42);
  const std::vector<Mask> per_head{Mask::from_spec("sliding_window:w=8", 97, 131), Mask::from_spec("random:p=0.2,seed=1", 97, 131),
                                   Mask::from_spec("causal", 97, 131), Mask::from_spec("strided:stride=16", 97, 131)};
  const Mask shared = Mask::from_spec("bigbird:block=16,seed=5", 97, 131);
  for (const CudaAlgorithm algorithm : algorithms()) {
    SCOPED_TRACE(spattn::cuda::cuda_algorithm_name(algorithm));
    expect_fp32_match(p, per_head, options_for(algorithm));
    expect_fp32_match(p, {shared}, options_for(algorithm));
    expect_fp32_match(p, {shared}, options_for(algorithm), /*layout_bshd=*/true);
  }
}

TEST_F(CudaAttention, EmptyMasksGiveZeroOutputsAndMinusInfinityLse) {
  const Problem p = make_problem(1, 2, 2, 97, 97, 32, 32, 5);
  const Mask empty = Mask::from_csr(sparse_formats::CsrPattern<int64_t>::empty(97, 97));
  // Rows 0..9 attend nothing, the others are causal; keys 90..96 are attended by nobody.
  sparse_formats::CsrPattern<int64_t> rows = sparse_formats::CsrPattern<int64_t>::empty(97, 97);
  rows.row_ptr.assign(1, 0);
  for (int64_t i = 0; i < 97; ++i) {
    for (int64_t j = 0; i >= 10 && j <= std::min<int64_t>(i, 89); ++j) rows.col_idx.push_back(j);
    rows.row_ptr.push_back(static_cast<int64_t>(rows.col_idx.size()));
  }
  const Mask some_empty = Mask::from_csr(std::move(rows));
  for (const CudaAlgorithm algorithm : algorithms()) {
    SCOPED_TRACE(spattn::cuda::cuda_algorithm_name(algorithm));
    const DeviceOut out = run_device<float>(p, {empty}, options_for(algorithm));
    for (float x : out.o) ASSERT_EQ(x, 0.0f);
    for (float x : out.lse) ASSERT_EQ(x, -std::numeric_limits<float>::infinity());
    for (float x : out.dq) ASSERT_EQ(x, 0.0f);
    for (float x : out.dk) ASSERT_EQ(x, 0.0f);
    for (float x : out.dv) ASSERT_EQ(x, 0.0f);
    expect_fp32_match(p, {some_empty}, options_for(algorithm));
  }
}

TEST_F(CudaAttention, FlashRunsAreBitIdentical) {
  const Problem p = make_problem(1, 2, 2, 257, 257, 64, 64, 9);
  const Mask mask = Mask::from_spec("bigbird:block=16,w=1,g=1,r=2,seed=3", 257, 257);
  const DeviceOut a = run_device<float>(p, {mask}, options_for(CudaAlgorithm::flash));
  const DeviceOut b = run_device<float>(p, {mask}, options_for(CudaAlgorithm::flash));
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(a.o, b.o) && same(a.lse, b.lse));
  EXPECT_TRUE(same(a.dq, b.dq) && same(a.dk, b.dk) && same(a.dv, b.dv));
}

// The CPU's non-finite policy on the device: NaN and infinity refused by name before any output is
// written (outputs keep their sentinel), -inf allowed in an LSE; check_finite = false skips the scan.
TEST_F(CudaAttention, NonFiniteInputsAreRefusedByNameAndNothingIsWritten) {
  using spattn::cuda::DeviceMemory;
  const Problem p = make_problem(1, 2, 2, 7, 9, 8, 8, 4);
  const Mask mask = Mask::from_spec("causal", 7, 9);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto with = [](std::vector<float> x, size_t at, float value) {
    x[at] = value;
    return x;
  };
  const size_t element = ((1 * 7) + 3) * 8 + 2;  // [0, 1, 3, 2] of a (1, 2, 7, 8) tensor
  // The refusal's message ("" when the call ran) and whether any output element was written.
  auto message_of_run = [&](const std::vector<float>& q, const std::vector<float>& d_o, float lse_value,
                            bool backward) -> std::pair<std::string, bool> {
    DeviceMemory<float> qd(q), kd(p.k), vd(p.v), dod(d_o), od(std::vector<float>(static_cast<size_t>(p.o_numel()), 7.0f));
    std::vector<float> lse_host(static_cast<size_t>(2 * 7), 0.5f);
    lse_host[3] = lse_value;
    DeviceMemory<float> lse(lse_host), dq(std::vector<float>(static_cast<size_t>(p.q_numel()), 7.0f));
    DeviceMemory<float> dk(std::vector<float>(static_cast<size_t>(p.k_numel()), 7.0f));
    DeviceMemory<float> dv(std::vector<float>(static_cast<size_t>(p.v_numel()), 7.0f));
    auto view = [](DeviceMemory<float>& m, int64_t n) { return TensorView<float>::contiguous(m.data(), 1, 2, n, 8); };
    const auto lse_view = TensorView<float>::contiguous(lse.data(), 1, 2, 7, 1);
    std::string message;
    try {
      if (backward) {
        spattn::cuda::attention_backward<float>(view(qd, 7), view(kd, 9), view(vd, 9), view(od, 7), lse_view,
                                                view(dod, 7), view(dq, 7), view(dk, 9), view(dv, 9), {mask},
                                                options_for(CudaAlgorithm::flash));
      } else {
        spattn::cuda::attention_forward<float>(view(qd, 7), view(kd, 9), view(vd, 9), view(od, 7), lse_view, {mask},
                                               options_for(CudaAlgorithm::flash));
      }
    } catch (const spattn::InvalidArgument& error) {
      message = error.what();
    }
    bool written = false;
    for (const auto* out : {&od, &dq, &dk, &dv}) {
      for (float x : out->download()) written = written || x != 7.0f;
    }
    return {message, written};
  };
  const auto refused = [](const std::pair<std::string, bool>& run, const std::string& expected) {
    EXPECT_NE(run.first.find(expected), std::string::npos) << run.first;
    EXPECT_FALSE(run.second) << "an output was written before the refusal";
  };
  refused(message_of_run(with(p.q, element, nan), p.d_o, 0.5f, false),
          "cuda::attention_forward: q[0, 1, 3, 2] = nan is not finite");
  refused(message_of_run(p.q, with(p.d_o, element, -inf), 0.5f, true),
          "cuda::attention_backward: d_o[0, 1, 3, 2] = -inf is not finite");
  refused(message_of_run(p.q, p.d_o, nan, true), "cuda::attention_backward: lse[0, 0, 3, 0] = nan");
  // -inf in an LSE is a row that attends nothing: accepted, and the backward writes its outputs.
  const auto accepted = message_of_run(p.q, p.d_o, -inf, true);
  EXPECT_EQ(accepted.first, "");
  EXPECT_TRUE(accepted.second);

  // check_finite = false: no scan, no refusal (what a NaN then gives is not specified).
  spattn::cuda::Options unchecked = options_for(CudaAlgorithm::flash);
  unchecked.check_finite = false;
  DeviceMemory<float> qd(with(p.q, element, nan)), kd(p.k), vd(p.v), od(static_cast<size_t>(p.o_numel()));
  DeviceMemory<float> lse(static_cast<size_t>(2 * 7));
  EXPECT_NO_THROW(spattn::cuda::attention_forward<float>(
      TensorView<float>::contiguous(qd.data(), 1, 2, 7, 8), TensorView<float>::contiguous(kd.data(), 1, 2, 9, 8),
      TensorView<float>::contiguous(vd.data(), 1, 2, 9, 8), TensorView<float>::contiguous(od.data(), 1, 2, 7, 8),
      TensorView<float>::contiguous(lse.data(), 1, 2, 7, 1), {mask}, unchecked));
}

TEST_F(CudaAttention, ASharedMemoryBudgetAboveTheDevicesIsRefused) {
  const Problem p = make_problem(1, 1, 1, 7, 7, 32, 32, 1);
  const int64_t too_much = spattn::cuda::shared_memory_per_block() + 4;
  EXPECT_THROW(run_device<float>(p, {Mask::full(7, 7)}, options_for(CudaAlgorithm::flash, too_much)),
               spattn::InvalidArgument);
}

}  // namespace
