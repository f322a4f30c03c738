// The flash tile lists built by the Thrust algorithm the device runs (src/device/thrust), here on
// the CPU with Thrust's CPP device system, equal array for array and bit for bit to
// build_flash_mask's: over the pattern library, odd and rectangular shapes, tiles that do and do
// not divide the lengths (1, and larger than the sequence), empty masks and both directions.
#include "device/thrust/flash_lists.hpp"
#include "schedules/flash/flash_mask.hpp"

#include "cuda/cuda_support.hpp"  // every registered pattern, at parameters that make it sparse

#include <spattn/error.hpp>
#include <spattn/mask.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using spattn::Mask;
using spattn::Pass;
using spattn::device::build_tile_lists_thrust_host;
using spattn::device::ListDirection;
using spattn::schedules::build_flash_mask;
using spattn::schedules::FlashMask;
using spattn::schedules::FlashTileLists;
using spattn::schedules::FlashTiles;

struct Tally {
  int64_t cases = 0, full = 0, partial = 0;
};

void expect_same(const FlashTileLists& runs, const spattn::device::FlatTileLists& got, const std::string& what) {
  SCOPED_TRACE(what);
  const spattn::device::FlatTileLists want = spattn::device::flatten_tile_lists({&runs});  // tile by tile
  EXPECT_EQ(got.num_outer, want.num_outer);
  EXPECT_EQ(got.num_inner, want.num_inner);
  EXPECT_EQ(got.inner_block, want.inner_block);
  EXPECT_EQ(got.bit_words, want.bit_words);
  EXPECT_EQ(got.tile_ptr, want.tile_ptr);
  EXPECT_EQ(got.partial_ptr, want.partial_ptr);
  EXPECT_EQ(got.entries, want.entries);
  EXPECT_EQ(got.bits, want.bits);
}

// Both directions of `pattern` with `tiles` (the backward's re-blockings: query_rows at block_q x
// block_k, key_cols at dkdv_block_k x dkdv_block_q transposed).
void check(const sparse_formats::CsrPatternView<int64_t>& pattern, int64_t n_q, int64_t n_k,
           const FlashTiles& tiles, const std::string& what, Tally& tally) {
  const FlashMask want = build_flash_mask(pattern, n_q, n_k, tiles, Pass::backward);
  const auto rows = build_tile_lists_thrust_host(pattern, n_q, n_k, tiles.block_q,
                                                           tiles.block_k, ListDirection::query_rows);
  const auto cols = build_tile_lists_thrust_host(
      pattern, n_q, n_k, tiles.dkdv_block_k, tiles.dkdv_block_q, ListDirection::key_cols);
  const std::string tile_text = " tiles " + std::to_string(tiles.block_q) + "x" +
                                std::to_string(tiles.block_k) + " / " +
                                std::to_string(tiles.dkdv_block_k) + "x" +
                                std::to_string(tiles.dkdv_block_q);
  expect_same(want.query_rows, rows, what + tile_text + " query_rows");
  expect_same(want.key_cols, cols, what + tile_text + " key_cols");
  for (const FlashTileLists* l : {&want.query_rows, &want.key_cols}) {
    tally.partial += l->num_partial();
    tally.full += l->num_stored() - l->num_partial();
  }
  ++tally.cases;
}

// Tiles that divide none, some or all of the lengths, 1 x 1, and larger than every sequence here.
const std::vector<FlashTiles>& tile_sweep() {
  static const std::vector<FlashTiles> tiles{
      {1, 1, 1, 1}, {3, 5, 7, 2}, {8, 8, 16, 4}, {16, 64, 64, 16}, {64, 64, 64, 64}, {300, 7, 5, 300},
      {13, 300, 300, 13}};
  return tiles;
}

TEST(ThrustFlashLists, MatchBuildFlashMaskOverThePatternLibrary) {
  const std::vector<std::string> specs{
      "full",
      "causal",
      "sliding_window:w=0",
      "sliding_window:w=5",
      "sliding_window:w=40",
      "bigbird:block=8,w=1,g=1,r=2,seed=3",
      "documents:num_docs=3,causal=1",
      "documents:num_docs=2",
      "random:p=0.1,seed=1",
      "random:p=0.7,seed=2",
      "random_blocks:block=8,p=0.4,seed=3",
      "random_blocks:block_m=4,block_n=16,p=0.5,seed=5",
      "sliding_window:w=3 | random:p=0.05,seed=9"};
  // Square odd sizes and rectangles both ways.
  const std::vector<std::pair<int64_t, int64_t>> shapes{{1, 1},   {7, 7},    {97, 97}, {257, 257},
                                                        {7, 97},  {97, 7},   {257, 61}, {61, 257},
                                                        {1, 257}, {257, 1}};
  Tally tally;
  int64_t skipped = 0;
  for (const std::string& spec : specs) {
    for (const auto& [n_q, n_k] : shapes) {
      Mask mask = Mask::full(1, 1);
      try {
        mask = Mask::from_spec(spec, n_q, n_k);
      } catch (const spattn::InvalidArgument&) {
        ++skipped;  // a spec that does not fit the shape (e.g. more documents than rows)
        continue;
      }
      const std::string what = spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k);
      for (const FlashTiles& tiles : tile_sweep()) check(mask.csr(), n_q, n_k, tiles, what, tally);
    }
  }
  // Nearly every spec builds at every shape (documents needs enough rows), and the sweep holds both
  // kinds of tile in numbers (868 cases, about 1.07 million full and 79 thousand partial tiles).
  EXPECT_LE(skipped, 10);
  EXPECT_GE(tally.cases, 120 * static_cast<int64_t>(tile_sweep().size()));
  EXPECT_GT(tally.full, 100000);
  EXPECT_GT(tally.partial, 10000);
}

// Every pattern of the registry (sparse_formats::list_patterns) and the CUDA tests' compositions.
TEST(ThrustFlashLists, MatchOverEveryRegisteredPattern) {
  Tally tally;
  for (const auto& [n_q, n_k] : std::vector<std::pair<int64_t, int64_t>>{{97, 97}, {257, 61}, {7, 7}}) {
    for (const std::string& spec : spattn::testing::cuda_pattern_specs(n_q, n_k)) {
      const Mask mask = spattn::testing::mask_of(spec, n_q, n_k);
      const std::string what = spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k);
      for (const FlashTiles& tiles : tile_sweep()) check(mask.csr(), n_q, n_k, tiles, what, tally);
    }
  }
  EXPECT_GT(tally.full, 0);
  EXPECT_GT(tally.partial, 0);
}

TEST(ThrustFlashLists, MatchOnEmptyMasksAndEmptySequences) {
  Tally tally;
  for (const auto& [n_q, n_k] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 97}, {257, 257}}) {
    const sparse_formats::CsrPattern<int64_t> empty(
        n_q, n_k, std::vector<int64_t>(static_cast<size_t>(n_q) + 1, 0), {});
    for (const FlashTiles& tiles : tile_sweep()) {
      check(empty.view(), n_q, n_k, tiles, "empty " + std::to_string(n_q) + "x" + std::to_string(n_k),
            tally);
    }
  }
  EXPECT_EQ(tally.full + tally.partial, 0);
}

// One element in each corner of a 70 x 70 mask: edge tiles with a single bit, bits in the second
// and later words of a tile's set, and the bit order r * inner_block + c in both directions.
TEST(ThrustFlashLists, MatchOnCornerElements) {
  const int64_t n = 70;
  std::vector<int64_t> row_ptr(n + 1, 0), col_idx;
  for (int64_t r = 0; r < n; ++r) {
    if (r == 0 || r == n - 1) {
      col_idx.push_back(0);
      col_idx.push_back(n - 1);
    }
    row_ptr[static_cast<size_t>(r) + 1] = static_cast<int64_t>(col_idx.size());
  }
  const sparse_formats::CsrPattern<int64_t> corners(n, n, row_ptr, col_idx);
  Tally tally;
  for (const FlashTiles& tiles : tile_sweep()) check(corners.view(), n, n, tiles, "corners", tally);
  EXPECT_GT(tally.partial, 0);
}

TEST(ThrustFlashLists, RejectsAMaskOfAnotherShapeAndNonPositiveTiles) {
  const Mask mask = Mask::from_spec("causal", 8, 8);
  EXPECT_THROW(build_tile_lists_thrust_host(mask.csr(), 8, 9, 4, 4, ListDirection::query_rows),
               spattn::InvalidArgument);
  EXPECT_THROW(build_tile_lists_thrust_host(mask.csr(), 8, 8, 0, 4, ListDirection::key_cols),
               spattn::InvalidArgument);
}

}  // namespace
