// The block-sparse flash schedule's numerics: hand-checked partial tiles, then forward and backward
// against the fp64 reference (tolerance rule of tests/support/compare.hpp) over every pattern of
// the library (its example spec at 600 x 600, small-scale specs at 1, 7, 97, 257 and rectangular
// shapes), the empty mask, a single entry, empty query rows and unattended keys, random 1 %, and
// user block sizes that the tiles span or split; runs are bit-identical (native, counted,
// repeated). The FlashMask's index widths and refusals: block_sparse_flash_mask_test.cpp. The
// word counts are tests/io/block_sparse_flash_io_test.cpp's.
#include "plan/dense_flash_tiles.hpp"
#include "support/flash_runs.hpp"
#include "support/head_fixture.hpp"
#include "support/reference_fixtures.hpp"

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::Ledger;
using spattn::testing::expect_backward_near;
using spattn::testing::expect_forward_near;
using spattn::testing::HeadFixture;
using spattn::testing::make_mask;
using spattn::testing::max_abs;
using spattn::testing::pattern_of;
using spattn::testing::reference_of;
using spattn::testing::run_flash_backward;
using spattn::testing::run_flash_forward;
using spattn::testing::same_bits;
using spattn::testing::widen;
using Mask = sparse_formats::CsrPattern<int64_t>;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The minimum masked M, a middle value and enough for one tile per sequence.
std::vector<int64_t> cache_sizes_for(const HeadShape& s) {
  const int64_t minimum = flash_min_cache_words(s, Pass::backward, FlashMasking::block_sparse);
  const int64_t n_q = std::max<int64_t>(s.seqlen_q, 1), n_k = std::max<int64_t>(s.seqlen_k, 1);
  const FlashTiles whole{n_q, n_k, n_q, n_k};
  const int64_t most = std::max(flash_resident_words(s, whole, Pass::forward, FlashMasking::block_sparse),
                                flash_resident_words(s, whole, Pass::backward, FlashMasking::block_sparse));
  const auto middle = static_cast<int64_t>(std::sqrt(static_cast<double>(minimum) * static_cast<double>(most)));
  return {minimum, std::max(middle, minimum), most};
}

// Forward and backward of `head` over `mask` with the masked tiles flash_tiles() picks at each M,
// against the fp64 reference; native, counted and repeated runs agree bit for bit.
void check_against_reference(const HeadFixture& head, const Mask& mask, const std::vector<int64_t>& cache_sizes) {
  const HeadShape& s = head.shape;
  const auto expected = reference_of(head, mask.view());
  const int64_t forward_terms = s.head_dim + s.seqlen_k;
  const int64_t backward_terms = std::max(s.head_dim, s.head_dim_v) + std::max(s.seqlen_q, s.seqlen_k);

  for (const int64_t cache_words : cache_sizes) {
    SCOPED_TRACE("M = " + std::to_string(cache_words));
    const FlashTiles fwd_tiles = flash_tiles(s, cache_words, Pass::forward, FlashMasking::block_sparse);
    const FlashTiles bwd_tiles = flash_tiles(s, cache_words, Pass::backward, FlashMasking::block_sparse);
    const FlashMask fwd_mask = build_flash_mask(mask.view(), s.seqlen_q, s.seqlen_k, fwd_tiles, Pass::forward);
    const FlashMask bwd_mask = build_flash_mask(mask.view(), s.seqlen_q, s.seqlen_k, bwd_tiles, Pass::backward);
    HeadFixture run = head;
    Ledger ledger;
    run_flash_forward(run, fwd_tiles, cache_words, &fwd_mask, &ledger);
    expect_forward_near(run, expected, forward_terms);
    if (cache_words == cache_sizes.front()) {  // determinism: a second (native) run, bit for bit
      HeadFixture again = head;
      run_flash_forward(again, fwd_tiles, cache_words, &fwd_mask);
      EXPECT_TRUE(same_bits(run.o, again.o) && same_bits(run.lse, again.lse));
    }

    run_flash_backward(run, bwd_tiles, cache_words, &bwd_mask, &ledger);
    expect_backward_near(run, expected, backward_terms);
    if (cache_words == cache_sizes.front()) {
      HeadFixture again = run;
      again.poison_backward(kNan);
      run_flash_backward(again, bwd_tiles, cache_words, &bwd_mask);
      EXPECT_TRUE(same_bits(run.dq, again.dq) && same_bits(run.dk, again.dk) && same_bits(run.dv, again.dv));
    }
    EXPECT_LE(ledger.peak_resident(), cache_words);

    // Non-trivial: an attended pair gives signal (inputs are random, exact zeros would be a bug).
    if (mask.nnz() > 0 && s.head_dim_v > 0) {
      EXPECT_GT(max_abs(widen(run.o)), 0.0);
      EXPECT_GT(max_abs(widen(run.dv)), 0.0);
    }
  }
}

std::string describe(const std::string& spec, int64_t n_q, int64_t n_k) {
  return spec + " at " + std::to_string(n_q) + " x " + std::to_string(n_k);
}

TEST(BlockSparseFlash, HandCheckedPartialTileExcludesMaskedKeysExactly) {
  // One query, three keys, mask {0, 2}: the masked middle key has the largest score, and the
  // attended scores (-30000, -29999) lie far below any "large negative" stand-in for -inf, so only
  // exact exclusion gives, with a = 1 / (1 + e), b = e / (1 + e):
  //   P = (a, 0, b), LSE = -30000 + ln(1 + e), O = 4 b;
  //   dO = 1: D = 4 b, dP = (0, -, 4), dS = (-4 a b, 0, 4 a b),
  //   dQ = dS K = 4 a b (k2 - k0) = 4 a b, dK = dS^T q = (-4 a b, 0, 4 a b), dV = (a, 0, b).
  HeadFixture head(HeadShape{1, 3, 1, 1});
  head.scale = 1.0f;
  head.q = {1.0f};
  head.k = {-30000.0f, 5.0f, -29999.0f};
  head.v = {0.0f, 100.0f, 4.0f};
  head.d_o = {1.0f};
  const float a = 1.0f / (1.0f + std::exp(1.0f)), b = 1.0f - a;
  const Mask mask = make_mask<int64_t>(1, 3, [](int64_t, int64_t j) { return j != 1; });
  for (const FlashTiles tiles : {FlashTiles{1, 3, 3, 1}, FlashTiles{1, 2, 1, 2}, FlashTiles{1, 1, 1, 1}}) {
    const FlashMask fwd_mask = build_flash_mask(mask.view(), 1, 3, tiles, Pass::forward);
    const FlashMask bwd_mask = build_flash_mask(mask.view(), 1, 3, tiles, Pass::backward);
    head.poison_outputs(kNan);
    run_flash_forward(head, tiles, 1000, &fwd_mask);
    EXPECT_NEAR(head.o[0], 4.0f * b, 1e-5f);
    EXPECT_NEAR(head.lse[0], -30000.0f + std::log(1.0f + std::exp(1.0f)), 4e-3f);  // ulp(30000) = 2e-3
    // The backward recomputes P = exp(S - LSE) from the fp32 LSE, whose ulp at 30000 is 2e-3:
    // P is good to about 2e-3 relative (dQ also cancels two terms of 4 a b 30000).
    run_flash_backward(head, tiles, 1000, &bwd_mask);
    EXPECT_NEAR(head.dq[0], 4.0f * a * b, 1e-2f);
    EXPECT_NEAR(head.dk[0], -4.0f * a * b, 3e-3f);
    EXPECT_EQ(head.dk[1], 0.0f);
    EXPECT_NEAR(head.dk[2], 4.0f * a * b, 3e-3f);
    EXPECT_NEAR(head.dv[0], a, 3e-3f);
    EXPECT_EQ(head.dv[1], 0.0f);
    EXPECT_NEAR(head.dv[2], b, 3e-3f);
  }
}

TEST(BlockSparseFlash, EveryLibraryPatternExampleMatchesTheReference) {
  // The example specs are written for long sequences (documents: 100 + 200 + 300 tokens).
  const HeadShape shape{600, 600, 8, 8};
  const HeadFixture head(shape, 600);
  const auto patterns = sparse_formats::list_patterns();
  ASSERT_GE(patterns.size(), 12u);
  for (const auto& info : patterns) {
    SCOPED_TRACE(describe(info.example, 600, 600));
    const Mask mask = pattern_of(info.example, 600, 600);
    check_against_reference(head, mask, {1000});
  }
}

// Every pattern at parameters that make it sparse at these lengths, plus each with its defaults.
std::vector<std::string> small_specs() {
  std::vector<std::string> specs = {
      "bigbird:block=16,w=1,g=1,r=2,seed=3", "dilated_window:w=6,dilation=3",
      "fixed:stride=32,c=4",                 "global_window:w=8,g=3",
      "prefix_lm:p=40",                      "random:p=0.1,seed=2",
      "random_blocks:block=8,p=0.3,seed=5",  "random_blocks:block_m=13,block_n=48,p=0.4,seed=1",
      "sliding_window:w=16",                 "sliding_window:w=20,causal=1",
      "strided:stride=16",                   "documents:num_docs=3,causal=1",
      "bigbird:block=16 & causal",           "sliding_window:w=4 | random:p=0.02,seed=9"};
  for (const auto& info : sparse_formats::list_patterns()) specs.push_back(info.name);
  return specs;
}

TEST(BlockSparseFlash, SmallScaleSpecsMatchTheReferenceOnSquareAndRectangularShapes) {
  // The minimum M (1 x 1 tiles: every pair its own tile) on the short shapes, a middle M on all.
  const HeadShape shapes[] = {{257, 257, 8, 8}, {97, 257, 8, 8}, {257, 97, 8, 16}, {97, 97, 64, 64}};
  for (const HeadShape& shape : shapes) {
    const HeadFixture head(shape, static_cast<uint32_t>(shape.seqlen_q * 31 + shape.seqlen_k));
    const auto sizes = cache_sizes_for(shape);
    const bool short_shape = shape.seqlen_q * shape.seqlen_k < 257 * 257;
    for (const std::string& spec : small_specs()) {
      if (spec == "documents" && shape.seqlen_q != shape.seqlen_k) continue;  // needs lengths_k
      SCOPED_TRACE(describe(spec, shape.seqlen_q, shape.seqlen_k));
      const Mask mask = pattern_of(spec, shape.seqlen_q, shape.seqlen_k);
      check_against_reference(head, mask, short_shape ? std::vector<int64_t>{sizes[0], sizes[1]}
                                                      : std::vector<int64_t>{sizes[1]});
    }
  }
}

TEST(BlockSparseFlash, TinySequencesWithEveryPattern) {
  for (const int64_t n : {1, 7}) {
    const HeadShape shape{n, n, 8, 8};
    const HeadFixture head(shape, static_cast<uint32_t>(n));
    for (const auto& info : sparse_formats::list_patterns()) {
      const std::string spec = info.name == "documents" ? "documents:num_docs=" + std::to_string(n) : info.name;
      SCOPED_TRACE(describe(spec, n, n));
      check_against_reference(head, pattern_of(spec, n, n), cache_sizes_for(shape));
    }
  }
}

TEST(BlockSparseFlash, EmptyMaskSingleEntryAndRandomOnePercent) {
  const HeadShape shape{257, 257, 16, 16};
  const HeadFixture head(shape, 11);
  const auto sizes = cache_sizes_for(shape);
  {
    SCOPED_TRACE("empty mask");
    const Mask empty = Mask::empty(257, 257);
    check_against_reference(head, empty, sizes);
    const FlashTiles tiles = flash_tiles(shape, sizes[1], Pass::forward, FlashMasking::block_sparse);
    const FlashMask fm = build_flash_mask(empty.view(), 257, 257, tiles, Pass::forward);
    HeadFixture run = head;
    run_flash_forward(run, tiles, sizes[1], &fm);
    for (const float value : run.o) EXPECT_EQ(value, 0.0f);
    for (const float value : run.lse) EXPECT_EQ(value, kNegInf);
  }
  {
    SCOPED_TRACE("single entry (200, 3)");
    const Mask single = make_mask<int64_t>(257, 257, [](int64_t i, int64_t j) { return i == 200 && j == 3; });
    check_against_reference(head, single, sizes);
  }
  {
    SCOPED_TRACE("random 1 %");
    check_against_reference(head, pattern_of("random:p=0.01,seed=4", 257, 257), sizes);
  }
}

TEST(BlockSparseFlash, EmptyQueryRowsAndUnattendedKeysGiveZerosNeverNan) {
  // Queries 0..99 attend nothing and keys 0..99 are attended by nobody; at this M the query and
  // key tiles are far smaller than 100 rows, so whole tiles have empty lists.
  const HeadShape shape{257, 257, 8, 8};
  HeadFixture head(shape, 12);
  const Mask mask =
      make_mask<int64_t>(257, 257, [](int64_t i, int64_t j) { return i >= 100 && j >= 100 && (i + j) % 3 == 0; });
  const int64_t cache_words = 1000;
  check_against_reference(head, mask, {cache_words});
  const FlashTiles fwd_tiles = flash_tiles(shape, cache_words, Pass::forward, FlashMasking::block_sparse);
  const FlashTiles bwd_tiles = flash_tiles(shape, cache_words, Pass::backward, FlashMasking::block_sparse);
  ASSERT_LT(fwd_tiles.block_q, 50);
  ASSERT_LT(bwd_tiles.block_q, 50);
  ASSERT_LT(bwd_tiles.dkdv_block_k, 50);
  const FlashMask fwd_mask = build_flash_mask(mask.view(), 257, 257, fwd_tiles, Pass::forward);
  const FlashMask bwd_mask = build_flash_mask(mask.view(), 257, 257, bwd_tiles, Pass::backward);
  EXPECT_EQ(fwd_mask.query_rows.run_ptr[1], 0) << "query tile 0 has an empty key list";
  EXPECT_EQ(bwd_mask.key_cols.run_ptr[1], 0) << "key tile 0 has an empty query list";
  run_flash_forward(head, fwd_tiles, cache_words, &fwd_mask);
  run_flash_backward(head, bwd_tiles, cache_words, &bwd_mask);
  for (int64_t r = 0; r < 100; ++r) {
    EXPECT_EQ(head.lse[static_cast<size_t>(r)], kNegInf);
    for (int64_t x = 0; x < 8; ++x) {
      const auto at = static_cast<size_t>(r * 8 + x);
      EXPECT_EQ(head.o[at], 0.0f);
      EXPECT_EQ(head.dq[at], 0.0f);
      EXPECT_EQ(head.dk[at], 0.0f);
      EXPECT_EQ(head.dv[at], 0.0f);
    }
  }
  for (const auto* values : {&head.o, &head.dq, &head.dk, &head.dv}) {
    for (const float value : *values) EXPECT_TRUE(std::isfinite(value));
  }
}

TEST(BlockSparseFlash, UserBlockSizesThatTilesSpanOrSplit) {
  // Mask blocks of 1, 5, 8, 13 and 100 elements against tiles chosen from M alone.
  const HeadShape shape{257, 257, 8, 8};
  const HeadFixture head(shape, 13);
  for (const int64_t block : {1, 5, 8, 13, 100}) {
    const std::string spec = "random_blocks:block=" + std::to_string(block) + ",p=0.3,seed=7";
    SCOPED_TRACE(spec);
    check_against_reference(head, pattern_of(spec, 257, 257), {800, 3000});
  }
}

}  // namespace
