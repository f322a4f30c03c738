// The plan of a CUDA call, made on the host without a GPU (spattn::cuda::plan_call,
// src/device/device_plan.cpp): which flash kernels run (the tensor-core kernels for fp16 / bf16
// when their shared memory fits, else the fp32 kernels with the planner's tiles), with which tiles
// and M; and the tensor-core kernels' shared-memory layouts (src/device/mma_layout.hpp), checked
// by hand. The device tests (cuda_half_precision_test) assert that real runs report the same plan.
#include "plan/dense_flash_tiles.hpp"
#include "device/device_tiles.hpp"
#include "device/mma_layout.hpp"

#include <spattn/cuda.hpp>
#include <spattn/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using spattn::Mask;
using spattn::Pass;
using spattn::cuda::ElementType;
using spattn::cuda::plan_call;
using spattn::device::mma_layout;
using ::testing::HasSubstr;

constexpr int64_t kH200Bytes = 232448;  // an H100's or H200's opt-in shared memory per block

spattn::cuda::Options budget(int64_t bytes) {
  spattn::cuda::Options options;
  options.shared_memory_bytes = bytes;
  return options;
}

TEST(CudaPlan, SixteenBitInputsRunTheTensorCoreKernelsWhenTheyFit) {
  const Mask window = Mask::from_spec("sliding_window:w=256", 16384, 16384);
  const auto forward = plan_call(Pass::forward, ElementType::bf16, 16384, 16384, 128, 128, window, budget(kH200Bytes));
  EXPECT_TRUE(forward.tensor_cores);
  EXPECT_EQ(forward.block_q, 64);
  EXPECT_EQ(forward.block_k, 64);
  EXPECT_EQ(forward.shared_memory_bytes, 113664);  // what the H200 runs reported (docs/results.md section 6)
  EXPECT_EQ(forward.cache_words, 28416);
  EXPECT_EQ(forward.to_string(),
            "cuda flash forward (tensor cores): M = 28416 words, 113664 bytes shared memory per block, block_q 64, "
            "block_k 64");
  const auto backward = plan_call(Pass::backward, ElementType::fp16, 16384, 16384, 128, 128, window, budget(kH200Bytes));
  EXPECT_TRUE(backward.tensor_cores);
  EXPECT_EQ(backward.shared_memory_bytes, 107520);
  EXPECT_EQ(backward.dkdv_block_q, 64);
  EXPECT_EQ(backward.dkdv_block_k, 64);
  // d = 32 fits 64 KiB.
  const Mask small = Mask::from_spec("causal", 97, 97);
  EXPECT_TRUE(plan_call(Pass::backward, ElementType::bf16, 97, 97, 32, 32, small, budget(64 * 1024)).tensor_cores);
}

TEST(CudaPlan, OtherwiseTheFp32KernelsWithThePlannersTilesForTheBudget) {
  const Mask window = Mask::from_spec("sliding_window:w=16", 257, 257);
  const auto expect_planner_tiles = [&](const spattn::cuda::DeviceRun& run, int64_t bytes, int64_t d) {
    const auto planned = spattn::device::device_flash_tiles({257, 257, d, d}, bytes / 4, run.pass,
                                                            spattn::schedules::FlashMasking::block_sparse);
    EXPECT_FALSE(run.tensor_cores) << run.to_string();
    EXPECT_EQ(run.block_q, planned.tiles.block_q);
    EXPECT_EQ(run.block_k, planned.tiles.block_k);
    EXPECT_EQ(run.cache_words, planned.cache_words);
    EXPECT_EQ(run.shared_memory_bytes, 4 * planned.smem_words);
  };
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    // fp32 inputs.
    expect_planner_tiles(plan_call(pass, ElementType::fp32, 257, 257, 128, 128, window, budget(kH200Bytes)),
                         kH200Bytes, 128);
    // 48 KiB holds no d = 128 tensor-core layout.
    expect_planner_tiles(plan_call(pass, ElementType::bf16, 257, 257, 128, 128, window, budget(48 * 1024)),
                         48 * 1024, 128);
    // Head dims above 128.
    expect_planner_tiles(plan_call(pass, ElementType::fp16, 257, 257, 160, 160, window, budget(kH200Bytes)),
                         kH200Bytes, 160);
    // Tensor cores switched off.
    spattn::cuda::Options off = budget(kH200Bytes);
    off.tensor_cores = false;
    expect_planner_tiles(plan_call(pass, ElementType::bf16, 257, 257, 128, 128, window, off), kH200Bytes, 128);
  }
  spattn::cuda::Options small_cache = budget(kH200Bytes);
  small_cache.algorithm = spattn::cuda::CudaAlgorithm::small_cache;
  EXPECT_EQ(plan_call(Pass::forward, ElementType::bf16, 257, 257, 64, 64, window, small_cache).to_string(),
            "cuda small_cache forward");
}

TEST(CudaPlan, BadArgumentsAreNamedAndWithoutABudgetADeviceIsNeeded) {
  const Mask mask = Mask::from_spec("causal", 97, 97);
  auto expect_invalid = [](auto&& call, const std::string& text) {
    try {
      call();
      FAIL() << "expected InvalidArgument mentioning " << text;
    } catch (const spattn::InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  expect_invalid([&] { plan_call(Pass::forward, ElementType::bf16, 97, 98, 64, 64, mask, budget(kH200Bytes)); },
                 "mask is 97 x 97, the call is seqlen_q x seqlen_k = 97 x 98");
  expect_invalid([&] { plan_call(Pass::forward, ElementType::bf16, 97, 97, 0, 64, mask, budget(kH200Bytes)); },
                 "head_dim = 0");
  expect_invalid([&] { plan_call(Pass::forward, ElementType::bf16, 97, 97, 64, 64, mask, budget(-4)); },
                 "shared_memory_bytes = -4");
  expect_invalid([&] { plan_call(Pass::backward, ElementType::fp32, 97, 97, 128, 128, mask, budget(1024)); },
                 "shared memory of 256 words");
  if (!spattn::cuda::device_available()) {
    try {
      plan_call(Pass::forward, ElementType::bf16, 97, 97, 64, 64, mask, budget(0));
      FAIL() << "expected RuntimeError without a device";
    } catch (const spattn::RuntimeError& e) {
      EXPECT_THAT(e.what(), HasSubstr(spattn::cuda::device_status()));
    }
  }
}

TEST(MmaLayout, BuffersAreDisjoint32ByteAlignedAndSizedByHand) {
  for (const int dim : {32, 64, 128}) {
    for (const Pass pass : {Pass::forward, Pass::backward}) {
      const auto l = mma_layout(dim, pass);
      const int64_t tile16 = 64 * (dim + 8) * 2;  // a 64-row 16-bit tile, rows padded by 8 elements
      std::vector<std::pair<int64_t, int64_t>> regions = {{0, 512}, {l.a, tile16}, {l.b, tile16}, {l.c, tile16}};
      if (pass == Pass::backward) regions.push_back({l.d, tile16});
      regions.push_back({l.s, 64 * 68 * 4});  // fp32 scores, rows padded by 4
      regions.push_back({l.p, 64 * 72 * 2});  // 16-bit P / dS, rows padded by 8
      if (pass == Pass::forward) {
        regions.push_back({l.acc, 64 * (dim + 4) * 4});  // fp32 O
      } else {
        regions.push_back({l.scratch, 8 * 16 * 20 * 4});  // a 16 x 16 fp32 tile per dK/dV warp
      }
      regions.push_back({l.stat0, 64 * 4});
      regions.push_back({l.stat1, 64 * 4});
      int64_t next = 0;
      for (const auto& [offset, size] : regions) {
        EXPECT_EQ(offset, next) << "dim " << dim;
        EXPECT_EQ(offset % 32, 0) << "dim " << dim;
        next = offset + size;
      }
      EXPECT_EQ(l.bytes, next);
    }
  }
  EXPECT_EQ(mma_layout(128, Pass::forward).bytes, 113664);
  EXPECT_EQ(mma_layout(128, Pass::backward).bytes, 107520);
  EXPECT_EQ(spattn::device::mma_dim(48, 48), 64);
  EXPECT_EQ(spattn::device::mma_dim(32, 64), 64);
  EXPECT_EQ(spattn::device::mma_dim(129, 64), 0);
}

}  // namespace
