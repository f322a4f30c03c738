// The CUDA API where no device can run it (this test's point: CI machines have the toolkit, or not
// even that, and no GPU): every call fails with a RuntimeError that says why, before touching
// memory; device_available() and device_status() agree. On a machine with a GPU the calls are
// covered by tests/cuda/cuda_attention_test.cpp, and this test checks only the printing.
#include <spattn/cuda.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;

TEST(CudaApi, StatusAgreesWithAvailability) {
  EXPECT_EQ(spattn::cuda::device_available(), spattn::cuda::device_status().empty());
#ifndef SPATTN_HAVE_CUDA
  EXPECT_FALSE(spattn::cuda::device_available());
  EXPECT_EQ(spattn::cuda::device_status(), "built without CUDA");
#endif
}

TEST(CudaApi, WithoutADeviceEveryCallSaysWhy) {
  if (spattn::cuda::device_available()) GTEST_SKIP() << "a CUDA device is present: see cuda_attention_test";
  const std::string reason = spattn::cuda::device_status();
#ifdef SPATTN_HAVE_CUDA
  EXPECT_THAT(reason, HasSubstr("no CUDA device"));
#endif
  // Valid shapes over host memory: nothing may be read or written (the device check comes first).
  std::vector<float> host(4 * 8, 1.0f), lse(4, 2.0f);
  using View = spattn::TensorView<float>;
  using CView = spattn::TensorView<const float>;
  const View t = View::matrix(host.data(), 4, 8);
  const View l = View::matrix(lse.data(), 4, 1);
  const spattn::Mask mask = spattn::Mask::from_spec("causal", 4, 4);
  for (const auto algorithm : {spattn::cuda::CudaAlgorithm::flash, spattn::cuda::CudaAlgorithm::small_cache}) {
    spattn::cuda::Options options;
    options.algorithm = algorithm;
    try {
      spattn::cuda::attention_forward<float>(CView(t), CView(t), CView(t), t, l, mask, options);
      FAIL() << "expected RuntimeError";
    } catch (const spattn::RuntimeError& e) {
      EXPECT_THAT(e.what(), HasSubstr("attention_forward"));
      EXPECT_THAT(e.what(), HasSubstr(reason));
    }
    EXPECT_THROW(spattn::cuda::attention_backward<float>(CView(t), CView(t), CView(t), CView(t), CView(l), CView(t), t,
                                                         t, t, mask, options),
                 spattn::RuntimeError);
  }
  EXPECT_EQ(lse[0], 2.0f);  // untouched
#ifdef SPATTN_HAVE_CUDA
  // The masks are checked before the device is needed: a per-head list names its count.
  try {
    spattn::cuda::attention_forward<float>(CView(t), CView(t), CView(t), t, l, std::vector<spattn::Mask>{mask, mask});
    FAIL() << "expected InvalidArgument";
  } catch (const spattn::InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda::attention_forward: masks has 2 masks, q has 1 heads"));
  }
#endif
  EXPECT_THROW(spattn::cuda::shared_memory_per_block(), spattn::RuntimeError);
  EXPECT_THROW(spattn::cuda::DeviceMemory<float>(16), spattn::RuntimeError);
}

TEST(CudaApi, ARunPrintsItsTilesAndBudget) {
  spattn::cuda::DeviceRun run;
  run.pass = spattn::Pass::backward;
  run.cache_words = 58112;
  run.shared_memory_bytes = 232448;
  run.block_q = 147;
  run.block_k = 9;
  run.dkdv_block_q = 7;
  run.dkdv_block_k = 110;
  EXPECT_EQ(run.to_string(),
            "cuda flash backward: M = 58112 words, 232448 bytes shared memory per block, block_q 147, "
            "block_k 9, dkdv_block_q 7, dkdv_block_k 110");
  run.algorithm = spattn::cuda::CudaAlgorithm::small_cache;
  EXPECT_EQ(run.to_string(), "cuda small_cache backward");
}

}  // namespace
