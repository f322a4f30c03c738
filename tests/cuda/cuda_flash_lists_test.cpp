// The flash tile lists the CUDA backend builds on the device (the Thrust algorithm of
// src/device/thrust on thrust::cuda::par, from each mask's uploaded CSR) against build_flash_mask
// on the host, flattened: equal array for array and bit for bit, for one mask and for a mask per
// head (the flattening's offsets), both directions, over the CUDA tests' pattern specs. The same
// algorithm runs on the CPU in tests/unit/thrust; this test needs a device and skips without one.
#include "cuda_support.hpp"

#include "device/device_lists.hpp"
#include "device/device_tiles.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <spattn/cuda.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace {

using spattn::Mask;
using spattn::Pass;
using spattn::device::device_flash_lists;
using spattn::device::FlatTileLists;
using spattn::device::ListsBuilder;
using spattn::schedules::FlashTiles;

FlatTileLists host_lists(const std::vector<Mask>& masks, const FlashTiles& tiles, bool key_cols) {
  std::vector<spattn::schedules::FlashMask> built;
  built.reserve(masks.size());
  std::vector<const spattn::schedules::FlashTileLists*> lists;
  for (const Mask& mask : masks) {
    built.push_back(spattn::schedules::build_flash_mask(mask.csr(), mask.seqlen_q(), mask.seqlen_k(),
                                                        tiles, Pass::backward));
    lists.push_back(key_cols ? &built.back().key_cols : &built.back().query_rows);
  }
  return spattn::device::flatten_tile_lists(lists);
}

void expect_same(const FlatTileLists& want, const FlatTileLists& got, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.num_outer, want.num_outer);
  EXPECT_EQ(got.num_inner, want.num_inner);
  EXPECT_EQ(got.inner_block, want.inner_block);
  EXPECT_EQ(got.bit_words, want.bit_words);
  EXPECT_EQ(got.num_masks, want.num_masks);
  EXPECT_EQ(got.tile_ptr, want.tile_ptr);
  EXPECT_EQ(got.partial_ptr, want.partial_ptr);
  EXPECT_EQ(got.entries, want.entries);
  EXPECT_EQ(got.bits, want.bits);
}

class CudaFlashLists : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!spattn::cuda::device_available()) GTEST_SKIP() << spattn::cuda::device_status();
  }
};

TEST_F(CudaFlashLists, DeviceBuiltListsMatchBuildFlashMask) {
  const std::vector<FlashTiles> sweep{{1, 1, 1, 1}, {3, 5, 7, 2}, {16, 64, 64, 16}, {64, 64, 64, 64},
                                      {300, 7, 5, 300}};
  int64_t partial = 0, stored = 0;
  for (const auto& [n_q, n_k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {97, 97}, {257, 61}}) {
    for (const std::string& spec : spattn::testing::cuda_pattern_specs(n_q, n_k)) {
      const std::vector<Mask> one{spattn::testing::mask_of(spec, n_q, n_k)};
      // A mask per head: the second one's offsets follow the first's.
      const std::vector<Mask> two{one.front(), Mask::from_spec("random:p=0.3,seed=11", n_q, n_k)};
      for (const FlashTiles& tiles : sweep) {
        for (const bool key_cols : {false, true}) {
          for (const std::vector<Mask>* masks : {&one, &two}) {
            const std::string what = spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k) +
                                     " tiles " + std::to_string(tiles.block_q) + "," +
                                     std::to_string(tiles.block_k) + (key_cols ? " key_cols" : " query_rows") +
                                     " masks " + std::to_string(masks->size());
            const FlatTileLists want = host_lists(*masks, tiles, key_cols);
            expect_same(want, device_flash_lists(*masks, tiles, Pass::backward, key_cols, ListsBuilder::thrust),
                        what + " thrust");
            expect_same(want, device_flash_lists(*masks, tiles, Pass::backward, key_cols, ListsBuilder::host),
                        what + " host");
            stored += static_cast<int64_t>(want.entries.size());
            for (int32_t e : want.entries) partial += e % 2;
          }
        }
      }
    }
  }
  EXPECT_GT(partial, 0);
  EXPECT_GT(stored - partial, 0);
}

TEST_F(CudaFlashLists, EmptyMaskHasEmptyLists) {
  const int64_t n = 70;
  const sparse_formats::CsrPattern<int64_t> empty(n, n, std::vector<int64_t>(n + 1, 0), {});
  const std::vector<Mask> masks{Mask::from_csr(empty.view())};
  const FlashTiles tiles{16, 16, 16, 16};
  for (const bool key_cols : {false, true}) {
    expect_same(host_lists(masks, tiles, key_cols),
                device_flash_lists(masks, tiles, Pass::backward, key_cols, ListsBuilder::thrust),
                key_cols ? "key_cols" : "query_rows");
  }
}

}  // namespace
