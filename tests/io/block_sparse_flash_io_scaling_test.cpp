// How the block-sparse flash schedule's predicted words scale (the count equals them:
// block_sparse_flash_io_test.cpp): linearly in n for a fixed-width sliding window, where the dense
// schedule's grow like n^2; and, across the pattern library, as a fraction of the dense
// schedule's words, which the tiles a mask touches decide, not its density. The printed numbers
// are quoted in docs/block_sparse.md.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "support/test_helpers.hpp"

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::testing::log_log_slope;
constexpr FlashMasking kMasked = FlashMasking::block_sparse;

TEST(BlockSparseFlashIo, SlidingWindowIoGrowsLinearlyInTheSequenceLength) {
  // w = 64 keys on each side, d = 64, M = 16384, n = 1024 .. 16384: the predicted words (equal to
  // the count, above) grow like n (each query tile visits about (block_q + 2 w) / block_k key
  // tiles), where the dense schedule's grow like n^2.
  const int64_t d = 64, m = 16384, w = 64;
  std::vector<double> ns, forward, backward, dense_backward;
  for (int64_t n = 1024; n <= 16384; n *= 2) {
    const HeadShape s{n, n, d, d};
    const auto start = std::chrono::steady_clock::now();
    const auto window = sparse_formats::sliding_window_pattern<int32_t>(n, n, w);
    const FlashTiles fwd_tiles = flash_tiles(s, m, Pass::forward, kMasked);
    const FlashTiles bwd_tiles = flash_tiles(s, m, Pass::backward, kMasked);
    const FlashMask fwd_mask = build_flash_mask(window.view(), n, n, fwd_tiles, Pass::forward);
    const FlashMask bwd_mask = build_flash_mask(window.view(), n, n, bwd_tiles, Pass::backward);
    const double build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const FlashWords f = predict_flash_forward_words(s, fwd_tiles, &fwd_mask);
    const FlashWords b = predict_flash_backward_words(s, bwd_tiles, &bwd_mask);
    const IoCount dense = predict_flash_backward(s, flash_tiles(s, m, Pass::backward));
    ns.push_back(static_cast<double>(n));
    forward.push_back(static_cast<double>(f.total().total()));
    backward.push_back(static_cast<double>(b.total().total()));
    dense_backward.push_back(static_cast<double>(dense.total()));
    std::printf("sliding window w %ld n %5ld: forward %ld values + %ld indices, backward %ld values + "
                "%ld indices, dense backward %ld (pattern + 2 flash masks built in %.1f ms)\n",
                static_cast<long>(w), static_cast<long>(n), static_cast<long>(f.values.total()),
                static_cast<long>(f.indices.total()), static_cast<long>(b.values.total()),
                static_cast<long>(b.indices.total()), static_cast<long>(dense.total()), build_ms);
  }
  const double forward_slope = log_log_slope(ns, forward);
  const double backward_slope = log_log_slope(ns, backward);
  const double dense_slope = log_log_slope(ns, dense_backward);
  std::printf("log-log slopes: forward %.4f, backward %.4f (dense backward %.4f)\n", forward_slope,
              backward_slope, dense_slope);
  EXPECT_NEAR(forward_slope, 1.0, 0.1);
  EXPECT_NEAR(backward_slope, 1.0, 0.1);
  EXPECT_GT(dense_slope, 1.8);
}

TEST(BlockSparseFlashIo, WordsAgainstTheDenseScheduleAcrossPatterns) {
  // When is sparse worth it (users.md item 8): the backward's predicted words over the dense
  // schedule's, n = 4096, d = 64, M = 16384 (tiles about 60 x 16 and 78 x 5). Structured masks
  // save in proportion to the tiles they touch; an unstructured mask touches nearly every tile
  // (a 1 % random mask leaves a 78 x 5 tile empty with probability 0.99^390 = 2 %) and saves
  // nothing: the tile granularity, not the density, decides.
  const int64_t n = 4096, d = 64, m = 16384;
  const HeadShape s{n, n, d, d};
  const double dense = static_cast<double>(predict_flash_backward(s, flash_tiles(s, m, Pass::backward)).total());
  const FlashTiles tiles = flash_tiles(s, m, Pass::backward, kMasked);
  std::printf("masked backward tiles: block_q %ld, block_k %ld, dkdv_block_q %ld, dkdv_block_k %ld\n",
              static_cast<long>(tiles.block_q), static_cast<long>(tiles.block_k),
              static_cast<long>(tiles.dkdv_block_q), static_cast<long>(tiles.dkdv_block_k));
  const auto ratio = [&](const std::string& spec) {
    const auto mask = sparse_formats::make_pattern<int32_t>(sparse_formats::parse_pattern_spec(spec), n, n);
    const FlashMask fm = build_flash_mask(mask.view(), n, n, tiles, Pass::backward);
    const double words = static_cast<double>(predict_flash_backward(s, tiles, &fm).total());
    const double density = static_cast<double>(mask.nnz()) / (static_cast<double>(n) * static_cast<double>(n));
    std::printf("%-40s density %.4f: backward words / dense = %.4f\n", spec.c_str(), density, words / dense);
    return words / dense;
  };
  EXPECT_LT(ratio("causal"), 0.6);
  EXPECT_LT(ratio("sliding_window:w=64"), 0.1);
  EXPECT_LT(ratio("sliding_window:w=256,causal=1"), 0.15);
  EXPECT_LT(ratio("documents:num_docs=16"), 0.15);
  EXPECT_LT(ratio("bigbird:block=64,w=1,g=2,r=3"), 0.3);
  EXPECT_LT(ratio("random_blocks:block=128,p=0.1,seed=1"), 0.3);
  EXPECT_GT(ratio("random:p=0.01,seed=1"), 0.9);
  EXPECT_GT(ratio("random:p=0.05,seed=1"), 0.99);
}

}  // namespace
