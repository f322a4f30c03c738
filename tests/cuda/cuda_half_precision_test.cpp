// The CUDA backend with fp16 and bf16 inputs against the fp64 reference: within 2x the error of
// the same computation done naively in that precision (every product, sum, exp and log rounded as
// it happens), both measured against fp64 on the rounded inputs. The flash path runs the
// tensor-core kernels here (mma_kernels.cuh) unless told not to: they are swept over every pattern,
// seqlens 1, 97, 257 and rectangular shapes, head dims that need padding, grouped-query attention,
// per-head masks and strided views, and compared with the fp32 kernels on the same inputs.
// Skips, with the reason, where no CUDA device is usable.
#include "cuda_attention_support.hpp"

namespace {

using namespace spattn::testing::cuda_attention;

// Each output within 2x the naive 16-bit computation's error against fp64
// (half_precision::expect_half_precision_rule); `tensor_cores`: which flash kernels must have run.
template <typename T>
void expect_half_match(const Problem& rounded_problem, const std::vector<Mask>& masks,
                       const spattn::cuda::Options& options, bool tensor_cores, bool layout_bshd = false) {
  const Problem& p = rounded_problem;
  const float scale = static_cast<float>(scale_of(p));
  const Truth t = truth(p, masks, scale);
  const Outputs lazy = naive<T>(p, masks, scale);
  const DeviceOut out = run_device<T>(p, masks, options, layout_bshd);
  if (options.algorithm == CudaAlgorithm::flash) {
    EXPECT_EQ(out.forward_run.tensor_cores, tensor_cores) << out.forward_run.to_string();
    EXPECT_EQ(out.backward_run.tensor_cores, tensor_cores) << out.backward_run.to_string();
    // The plan made without running says the same.
    const auto type = spattn::cuda::element_type_of<T>();
    EXPECT_EQ(out.forward_run.to_string(),
              spattn::cuda::plan_call(spattn::Pass::forward, type, p.n_q, p.n_k, p.d, p.e, masks[0], options).to_string());
    EXPECT_EQ(out.backward_run.to_string(),
              spattn::cuda::plan_call(spattn::Pass::backward, type, p.n_q, p.n_k, p.d, p.e, masks[0], options).to_string());
  }
  expect_half_precision_rule(p, masks, out, lazy, t);
}

template <typename T>
void expect_within_twice_naive(const char* type) {
  struct Case {
    int64_t n_q, n_k, d;
    const char* spec;
  };
  const Case cases[] = {{97, 257, 64, "sliding_window:w=16"},
                        {257, 257, 128, "bigbird:block=16,w=1,g=1,r=2,seed=3"},
                        {257, 257, 64, "full"},
                        {257, 97, 32, "random:p=0.1,seed=2"}};
  for (const Case& c : cases) {
    const Problem p = rounded<T>(make_problem(1, 2, 2, c.n_q, c.n_k, c.d, c.d, static_cast<uint64_t>(c.n_q + c.d)));
    const Mask mask = std::string(c.spec) == "full" ? Mask::full(c.n_q, c.n_k) : Mask::from_spec(c.spec, c.n_q, c.n_k);
    for (const CudaAlgorithm algorithm : algorithms()) {
      for (const bool tensor_cores : {true, false}) {
        if (algorithm != CudaAlgorithm::flash && !tensor_cores) continue;
        SCOPED_TRACE(std::string(type) + ": " + label(c.spec, p, algorithm) + (tensor_cores ? "" : ", fp32 kernels"));
        spattn::cuda::Options options = options_for(algorithm);
        options.tensor_cores = tensor_cores;
        expect_half_match<T>(p, {mask}, options, tensor_cores);
      }
    }
  }
}

TEST_F(CudaAttention, HalfPrecisionIsWithinTwiceTheNaiveError) { expect_within_twice_naive<half_t>("fp16"); }
TEST_F(CudaAttention, Bfloat16IsWithinTwiceTheNaiveError) { expect_within_twice_naive<bfloat16_t>("bf16"); }

// The tensor-core kernels on every pattern and odd shapes: 1 x 1, tiles with tails (97, 257),
// rectangles both ways, head dims padded to the kernels' 32 / 64 / 128 (48, d != e).
template <typename T>
void expect_tensor_cores_on_every_pattern(const char* type) {
  struct Shape {
    int64_t n_q, n_k, d, e;
  };
  const Shape shapes[] = {{1, 1, 32, 32}, {97, 97, 64, 64}, {97, 257, 48, 48}, {257, 97, 32, 64}, {257, 257, 128, 128}};
  for (const Shape& s : shapes) {
    const Problem p = rounded<T>(make_problem(1, 2, 2, s.n_q, s.n_k, s.d, s.e, static_cast<uint64_t>(s.n_q * 7 + s.d)));
    std::vector<std::string> specs = spattn::testing::cuda_pattern_specs(s.n_q, s.n_k);
    specs.push_back("full");
    for (const std::string& spec : specs) {
      const Mask mask = spec == "full" ? Mask::full(s.n_q, s.n_k) : spattn::testing::mask_of(spec, s.n_q, s.n_k);
      SCOPED_TRACE(std::string(type) + ": " + label(spec, p, CudaAlgorithm::flash));
      expect_half_match<T>(p, {mask}, options_for(CudaAlgorithm::flash), true);
    }
  }
}

TEST_F(CudaAttention, TensorCoreKernelsMatchOnEveryPatternAndShapeFp16) {
  if (!tested(CudaAlgorithm::flash)) GTEST_SKIP() << "flash not among SPATTN_CUDA_TEST_ALGORITHMS";
  expect_tensor_cores_on_every_pattern<half_t>("fp16");
}
TEST_F(CudaAttention, TensorCoreKernelsMatchOnEveryPatternAndShapeBf16) {
  if (!tested(CudaAlgorithm::flash)) GTEST_SKIP() << "flash not among SPATTN_CUDA_TEST_ALGORITHMS";
  expect_tensor_cores_on_every_pattern<bfloat16_t>("bf16");
}

TEST_F(CudaAttention, TensorCoreKernelsWithGroupedQueryAttentionPerHeadMasksAndStridedViews) {
  if (!tested(CudaAlgorithm::flash)) GTEST_SKIP() << "flash not among SPATTN_CUDA_TEST_ALGORITHMS";
  const Problem p = rounded<bfloat16_t>(make_problem(2, 4, 2, 97, 131, 64, 64, 43));
  const std::vector<Mask> per_head{Mask::from_spec("sliding_window:w=8", 97, 131), Mask::from_spec("random:p=0.2,seed=1", 97, 131),
                                   Mask::from_spec("causal", 97, 131), Mask::from_spec("strided:stride=16", 97, 131)};
  const Mask shared = Mask::from_spec("bigbird:block=16,seed=5", 97, 131);
  const auto options = options_for(CudaAlgorithm::flash);
  expect_half_match<bfloat16_t>(p, per_head, options, true);
  expect_half_match<bfloat16_t>(p, {shared}, options, true);
  expect_half_match<bfloat16_t>(p, {shared}, options, true, /*layout_bshd=*/true);
}

TEST_F(CudaAttention, TensorCoreKernelsNeedTheirSharedMemoryAndHeadDimsUpTo128) {
  if (!tested(CudaAlgorithm::flash)) GTEST_SKIP() << "flash not among SPATTN_CUDA_TEST_ALGORITHMS";
  const Mask mask = Mask::from_spec("sliding_window:w=16", 97, 97);
  // 64 KiB holds the d = 32 kernels (52224 and 58368 bytes) but not the d = 128 ones (113664 and
  // 107520 bytes): those fall back to the fp32 kernels.
  const Problem small = rounded<half_t>(make_problem(1, 1, 1, 97, 97, 32, 32, 3));
  expect_half_match<half_t>(small, {mask}, options_for(CudaAlgorithm::flash, 64 * 1024), true);
  const Problem wide = rounded<half_t>(make_problem(1, 1, 1, 97, 97, 128, 128, 4));
  expect_half_match<half_t>(wide, {mask}, options_for(CudaAlgorithm::flash, 64 * 1024), false);
  // Head dims above 128 run the fp32 kernels.
  const Problem wider = rounded<half_t>(make_problem(1, 1, 1, 97, 97, 160, 160, 5));
  expect_half_match<half_t>(wider, {mask}, options_for(CudaAlgorithm::flash), false);
}

TEST_F(CudaAttention, TensorCoreRunsAreBitIdentical) {
  if (!tested(CudaAlgorithm::flash)) GTEST_SKIP() << "flash not among SPATTN_CUDA_TEST_ALGORITHMS";
  const Problem p = rounded<bfloat16_t>(make_problem(1, 2, 2, 257, 257, 64, 64, 9));
  const Mask mask = Mask::from_spec("bigbird:block=16,w=1,g=1,r=2,seed=3", 257, 257);
  const DeviceOut a = run_device<bfloat16_t>(p, {mask}, options_for(CudaAlgorithm::flash));
  const DeviceOut b = run_device<bfloat16_t>(p, {mask}, options_for(CudaAlgorithm::flash));
  ASSERT_TRUE(a.forward_run.tensor_cores && a.backward_run.tensor_cores);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.lse, b.lse);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

}  // namespace
