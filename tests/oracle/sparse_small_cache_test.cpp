// Tier 2 for the density-adaptive small-cache schedule: forward and backward against the fp64
// reference over the mask pattern library, uniform random masks, empty / single-entry masks,
// empty rows, rectangular shapes, sequence lengths 1, 7, 97, 257 and fast-memory sizes from the
// minimum up; validation messages. The same bits for native, team and time-tile runs:
// sparse_small_cache_determinism_test.cpp.
#include "support/head_fixture.hpp"
#include "support/sparse_small_cache_runs.hpp"
#include "support/test_helpers.hpp"

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using sparse_formats::CsrPattern;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::testing::contains;
using spattn::testing::expect_backward_near;
using spattn::testing::expect_forward_near;
using spattn::testing::expect_nontrivial_outputs;
using spattn::testing::HeadFixture;
using spattn::testing::HeadReference;
using spattn::testing::kSanitized;
using spattn::testing::max_abs;
using spattn::testing::message_of;
using spattn::testing::prepare_mask;
using spattn::testing::reference_of;
using spattn::testing::run_sparse_small_cache_backward;
using spattn::testing::run_sparse_small_cache_forward;
using spattn::testing::widen;

// Forward then backward (on the forward's own O and LSE) at fast memory M, compared with the
// reference; every output word is checked (the NaN the outputs start at would show).
HeadFixture check_against_reference(const HeadShape& shape, const SparseSmallCacheMask& mask, int64_t cache_words,
                                    const HeadReference& expected) {
  HeadFixture p(shape);
  Ledger ledger;
  run_sparse_small_cache_forward(p, mask, cache_words, &ledger);
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  expect_forward_near(p, expected, d + n);
  run_sparse_small_cache_backward(p, mask, cache_words, &ledger);
  expect_backward_near(p, expected, d + e + m + n);
  EXPECT_LE(ledger.peak_resident(), cache_words);
  return p;
}

// Checks one mask at several M (one reference computation).
void check_mask(const HeadShape& shape, const CsrPattern<int32_t>& mask32,
                const std::vector<int64_t>& caches) {
  const SparseSmallCacheMask mask = prepare_mask(mask32);
  const HeadReference expected = reference_of(HeadFixture(shape), mask32.view());
  for (int64_t cache_words : caches) {
    SCOPED_TRACE(::testing::Message()
                 << "seqlen_q " << shape.seqlen_q << " seqlen_k " << shape.seqlen_k << " d "
                 << shape.head_dim << " d_v " << shape.head_dim_v << " nnz " << mask.nnz() << " M "
                 << cache_words);
    check_against_reference(shape, mask, cache_words, expected);
  }
}

bool nontrivial(const std::vector<float>& x) { return max_abs(widen(x)) > 1e-2; }

TEST(SparseSmallCache, MatchesTheReferenceOnEveryPatternOfTheLibrary) {
  // Each pattern's documented example, at 257 x 257 (the documents example names its own
  // lengths, 600 in all).
  int64_t checked = 0;
  for (const sparse_formats::PatternInfo& info : sparse_formats::list_patterns()) {
    SCOPED_TRACE(info.example);
    const auto spec = sparse_formats::parse_pattern_spec(info.example);
    int64_t n = info.name == "documents" ? 600 : kSanitized ? 97 : 257;
    CsrPattern<int32_t> mask = sparse_formats::make_pattern(spec, n, n);
    if (mask.nnz() == 0) {  // random_blocks' 64-blocks may all miss at 97
      n = 257;
      mask = sparse_formats::make_pattern(spec, n, n);
    }
    ASSERT_GT(mask.nnz(), 0);
    check_mask(HeadShape{n, n, 8, 8}, mask,
               kSanitized ? std::vector<int64_t>{700} : std::vector<int64_t>{40, 700});
    ++checked;
  }
  EXPECT_GE(checked, 12);
}

TEST(SparseSmallCache, MatchesTheReferenceOnStructuredMasksAtSmallScale) {
  // The library's patterns with parameters that give structure at 97 x 97 and 61 x 130, plus
  // compositions.
  const char* specs[] = {"sliding_window:w=5",
                         "sliding_window:w=3,causal=1",
                         "dilated_window:w=3,dilation=4",
                         "global_window:w=4,g=3",
                         "strided:stride=8",
                         "fixed:stride=16,c=2",
                         "bigbird:block=8,w=1,g=1,r=2,seed=3",
                         "prefix_lm:p=20",
                         "random_blocks:block=8,p=0.2,seed=3",
                         "documents:num_docs=5,causal=1",
                         "causal",
                         "sliding_window:w=8 | random:p=0.02,seed=5",
                         "bigbird:block=16 & causal"};
  for (const char* text : specs) {
    SCOPED_TRACE(text);
    const auto spec = sparse_formats::parse_pattern_spec(text);
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{97, 97}, {61, 130}, {130, 61}}) {
      if (std::string(text).find("documents") != std::string::npos && m != n) continue;
      if (kSanitized && m != n) continue;
      const CsrPattern<int32_t> mask = sparse_formats::make_pattern(spec, m, n);
      check_mask(
          HeadShape{m, n, 16, 12}, mask,
          kSanitized ? std::vector<int64_t>{11, 900} : std::vector<int64_t>{11, 64, 900, 40000});
    }
  }
}

TEST(SparseSmallCache, MatchesTheReferenceOnUniformRandomMasks) {
  for (double density : {0.01, 0.05, 0.25}) {
    for (int64_t d : {8, 64}) {
      if (kSanitized && d > 8) continue;
      const int64_t n = 257;
      SCOPED_TRACE(::testing::Message() << "density " << density);
      const auto mask = sparse_formats::random_pattern(n, n, density, 11);
      check_mask(HeadShape{n, n, d, d}, mask, {16, 4 * d, d * d, n * d});
    }
  }
}

TEST(SparseSmallCache, MatchesTheReferenceOverSequenceLengths) {
  const std::pair<int64_t, int64_t> seqlens[] = {{1, 1},  {7, 7},  {97, 97}, {257, 257},
                                                 {1, 97}, {97, 1}, {7, 257}, {257, 7}};
  for (const auto& [m, n] : seqlens) {
    for (const char* text : {"random:p=0.3,seed=2", "causal", "full"}) {
      SCOPED_TRACE(text);
      const auto mask =
          sparse_formats::make_pattern(sparse_formats::parse_pattern_spec(text), m, n);
      std::vector<int64_t> caches = {5000};
      if (!kSanitized || m * n <= 10000) caches.push_back(23);
      if (!kSanitized) caches.push_back(300);
      if (m * n <= 10000) caches.push_back(sparse_small_cache_min_cache_words(Pass::backward));
      check_mask(HeadShape{m, n, 16, 16}, mask, caches);
    }
  }
}

TEST(SparseSmallCache, ValueHeadDimDifferentFromQueryHeadDim) {
  for (const HeadShape shape : {HeadShape{97, 61, 8, 24}, HeadShape{33, 70, 64, 5}}) {
    const auto mask = sparse_formats::random_pattern(shape.seqlen_q, shape.seqlen_k, 0.2, 4);
    check_mask(shape, mask, {11, 40, 700, 20000});
  }
}

TEST(SparseSmallCache, EmptyRowsGiveZeroOutputMinusInfinityLseAndNoGradient) {
  // Rows 0, 3, 4 and 9 attend nothing; keys 2 and 5 are attended by nobody.
  const std::vector<std::vector<int32_t>> rows = {
      {}, {0, 1}, {7}, {}, {}, {0, 3, 4, 6, 7}, {1}, {3, 4}, {0, 1, 3, 4, 6, 7}, {}};
  auto mask = CsrPattern<int32_t>::empty(10, 8);
  for (size_t i = 0; i < rows.size(); ++i) {
    mask.col_idx.insert(mask.col_idx.end(), rows[i].begin(), rows[i].end());
    mask.row_ptr[i + 1] = static_cast<int32_t>(mask.col_idx.size());
  }
  const HeadShape shape{10, 8, 4, 3};
  for (int64_t cache_words : {11, 30, 500}) {
    const SparseSmallCacheMask prepared = prepare_mask(mask);
    const HeadFixture p =
        check_against_reference(shape, prepared, cache_words, reference_of(HeadFixture(shape), mask.view()));
    for (int64_t i : {0, 3, 4, 9}) {
      EXPECT_EQ(p.lse[static_cast<size_t>(i)], -std::numeric_limits<float>::infinity());
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(p.o[static_cast<size_t>(i * 3 + c)], 0.0f);
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(p.dq[static_cast<size_t>(i * 4 + c)], 0.0f);
    }
    for (int64_t j : {2, 5}) {
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(p.dk[static_cast<size_t>(j * 4 + c)], 0.0f);
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(p.dv[static_cast<size_t>(j * 3 + c)], 0.0f);
    }
    EXPECT_TRUE(nontrivial(p.o));
    EXPECT_TRUE(nontrivial(p.dq));
  }
}

TEST(SparseSmallCache, EmptyMaskGivesZerosAndMinusInfinity) {
  for (const HeadShape shape :
       {HeadShape{9, 5, 4, 3}, HeadShape{5, 0, 4, 3}, HeadShape{0, 6, 4, 3}}) {
    const auto mask = CsrPattern<int32_t>::empty(shape.seqlen_q, shape.seqlen_k);
    const SparseSmallCacheMask prepared = prepare_mask(mask);
    HeadFixture p(shape);
    run_sparse_small_cache_forward(p, prepared, 11);
    run_sparse_small_cache_backward(p, prepared, 11);
    const auto m = static_cast<size_t>(shape.seqlen_q), n = static_cast<size_t>(shape.seqlen_k);
    EXPECT_EQ(p.lse, std::vector<float>(m, -std::numeric_limits<float>::infinity()));
    EXPECT_EQ(p.o, std::vector<float>(m * 3, 0.0f));
    EXPECT_EQ(p.dq, std::vector<float>(m * 4, 0.0f));
    EXPECT_EQ(p.dk, std::vector<float>(n * 4, 0.0f));
    EXPECT_EQ(p.dv, std::vector<float>(n * 3, 0.0f));
  }
}

TEST(SparseSmallCache, SingleEntryAttendsOneKeyWithProbabilityOne) {
  // Query 2 attends key 4 only: O_2 = V_4, LSE_2 = scale q_2 . k_4, and P = 1 makes dS = 0, so
  // dQ = dK = 0 and dV_4 = dO_2.
  auto mask = CsrPattern<int32_t>::empty(5, 6);
  mask.col_idx = {4};
  for (size_t i = 3; i < mask.row_ptr.size(); ++i) mask.row_ptr[i] = 1;
  const HeadShape shape{5, 6, 3, 2};
  const SparseSmallCacheMask prepared = prepare_mask(mask);
  HeadFixture p(shape);
  run_sparse_small_cache_forward(p, prepared, 12);
  run_sparse_small_cache_backward(p, prepared, 12);
  EXPECT_EQ(p.o[4], p.v[8]);
  EXPECT_EQ(p.o[5], p.v[9]);
  const float s = p.scale * (p.q[6] * p.k[12] + p.q[7] * p.k[13] + p.q[8] * p.k[14]);
  EXPECT_NEAR(p.lse[2], s, 1e-6);
  EXPECT_EQ(p.dq, std::vector<float>(15, 0.0f));
  EXPECT_EQ(p.dk, std::vector<float>(18, 0.0f));
  EXPECT_EQ(p.dv, (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, p.d_o[4], p.d_o[5], 0, 0}));
}

TEST(SparseSmallCache, OutputsAreNonTrivial) {
  const HeadShape shape{64, 64, 8, 8};
  const auto mask = sparse_formats::random_pattern(64, 64, 0.1, 3);
  const SparseSmallCacheMask prepared = prepare_mask(mask);
  const HeadFixture p =
      check_against_reference(shape, prepared, 100, reference_of(HeadFixture(shape), mask.view()));
  expect_nontrivial_outputs(p);
}

TEST(SparseSmallCache, CacheBelowTheMinimumIsRejectedStatingIt) {
  const auto mask = prepare_mask(sparse_formats::random_pattern(8, 8, 0.5, 1));
  const HeadShape shape{8, 8, 4, 4};
  EXPECT_EQ(sparse_small_cache_min_cache_words(Pass::forward), 11);
  EXPECT_EQ(sparse_small_cache_min_cache_words(Pass::backward), 11);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { sparse_small_cache_tiles(shape, mask, 10, Pass::forward); }),
                       "sparse_small_cache_tiles: fast memory M = 10 words is below the minimum "
                       "of 11 words for the sparse small-cache forward"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { sparse_small_cache_tiles(shape, mask, 3, Pass::backward); }),
                       "below the minimum of 11 words for the sparse small-cache backward"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         sparse_small_cache_tiles(HeadShape{8, 8, -1, 4}, mask, 100, Pass::forward);
                       }),
                       "head_dim -1"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         sparse_small_cache_tiles(HeadShape{8, 9, 4, 4}, mask, 100, Pass::forward);
                       }),
                       "sparse_small_cache_tiles: the mask is 8 x 8, the problem has seqlen_q 8, "
                       "seqlen_k 9"));
}

TEST(SparseSmallCache, InvalidMasksAreRejectedWhenPrepared) {
  auto mask = CsrPattern<int64_t>::empty(3, 4);
  mask.col_idx = {1, 4};
  mask.row_ptr = {0, 1, 2, 2};
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { SparseSmallCacheMask prepared(mask.view()); }),
      "mask: col_idx[1] = 4 is out of range [0, 4) (row 1)"));
  mask.col_idx = {2, 1};
  mask.row_ptr = {0, 2, 1, 2};
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { SparseSmallCacheMask prepared(mask.view()); }),
      "mask: row_ptr[2] = 1 < row_ptr[1] = 2"));
  const std::vector<int64_t> row_ptr = {0};
  const sparse_formats::CsrPatternView<int64_t> negative{-1, 2, row_ptr.data(), nullptr};
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { SparseSmallCacheMask prepared(negative); }),
      "mask: "));
  const sparse_formats::CsrPatternView<int64_t> null_view{2, 2, nullptr, nullptr};
  EXPECT_TRUE(contains(
      message_of<spattn::InvalidArgument>([&] { SparseSmallCacheMask prepared(null_view); }),
      "mask: row_ptr is null"));
}

TEST(SparseSmallCache, MismatchedOperandsAreRejectedBeforeAnythingIsWritten) {
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);  // outputs at 7: nothing may change them
  const auto mask = prepare_mask(sparse_formats::random_pattern(6, 5, 0.5, 2));
  const auto tiles = sparse_small_cache_tiles(p.shape, mask, 100, Pass::forward);
  FastMemory fast(100, nullptr, "test");
  HeadForward head = p.forward();
  head.k = SlowMatrix<const float>::dense(p.k.data(), 5, 3);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { sparse_small_cache_forward(fast, head, mask, tiles); }),
                       "sparse_small_cache_forward: k has head_dim 3, q has 4"));
  head = p.forward();
  head.lse = SlowMatrix<float>::dense(p.lse.data(), 5, 1);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { sparse_small_cache_forward(fast, head, mask, tiles); }),
                       "sparse_small_cache_forward: lse is 5 x 1, expected 6 x 1"));
  const auto other_mask = prepare_mask(sparse_formats::random_pattern(6, 6, 0.5, 2));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         sparse_small_cache_forward(fast, p.forward(), other_mask, tiles);
                       }),
                       "sparse_small_cache_forward: the mask is 6 x 6, q and k have 6 and 5 rows"));

  const auto backward_tiles = sparse_small_cache_tiles(p.shape, mask, 100, Pass::backward);
  HeadBackward grad = p.backward();
  grad.dv = SlowMatrix<float>::dense(p.dv.data(), 5, 2);
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>(
                           [&] { sparse_small_cache_backward(fast, grad, mask, backward_tiles); }),
                       "sparse_small_cache_backward: dv is 5 x 2, expected 5 x 3 (seqlen_k x "
                       "head_dim_v)"));
  EXPECT_EQ(p.o, std::vector<float>(18, 7.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 7.0f));
  EXPECT_EQ(p.dv, std::vector<float>(15, 7.0f));
}

// Tiles chosen for another pass, shape or mask cannot come from a plan (the plan hands the tiles
// out with the mask's prepared structure), so the schedule asserts them: a caller's bug.
TEST(SparseSmallCacheDeathTest, TilesForAnotherPassShapeOrMaskAreAssertedAgainst) {
#ifdef NDEBUG
  GTEST_SKIP() << "the schedules assert their tiles; asserts are off in this build (NDEBUG)";
#else
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);
  const auto mask = prepare_mask(sparse_formats::random_pattern(6, 5, 0.5, 2));
  const auto tiles = sparse_small_cache_tiles(p.shape, mask, 100, Pass::forward);
  FastMemory fast(100, nullptr, "test");
  const auto denser = prepare_mask(sparse_formats::random_pattern(6, 5, 0.9, 2));
  EXPECT_DEATH(sparse_small_cache_forward(fast, p.forward(), denser, tiles), "tiles chosen for another mask");
  EXPECT_DEATH(sparse_small_cache_backward(fast, p.backward(), mask, tiles), "tiles chosen for the other pass");
  const auto other_tiles = sparse_small_cache_tiles(HeadShape{6, 5, 4, 2}, mask, 100, Pass::forward);
  EXPECT_DEATH(sparse_small_cache_forward(fast, p.forward(), mask, other_tiles), "tiles chosen for another shape");
  auto zero_tiles = tiles;
  zero_tiles.output.chunk = 0;
  EXPECT_DEATH(sparse_small_cache_forward(fast, p.forward(), mask, zero_tiles), "tiles below 1");
#endif
}

TEST(SparseSmallCache, FastMemorySmallerThanTheTilesIsRefusedBeforeAnythingIsWritten) {
  HeadFixture p(HeadShape{6, 5, 4, 3}, 1, 7.0f);  // outputs at 7: nothing may change them
  const auto mask = prepare_mask(sparse_formats::random_pattern(6, 5, 0.5, 2));
  const auto tiles = sparse_small_cache_tiles(p.shape, mask, 100, Pass::forward);
  const int64_t needed = sparse_small_cache_fast_words(tiles);
  const std::string fewer = std::to_string(needed - 1);
  FastMemory fast(needed - 1, nullptr, "test");
  EXPECT_TRUE(contains(message_of<spattn::RuntimeError>(
                           [&] { sparse_small_cache_forward(fast, p.forward(), mask, tiles); }),
                       "sparse_small_cache_forward: the tiles need " + std::to_string(needed) +
                           " words of fast memory, " + fewer + " of M = " + fewer +
                           " are free (tiles chosen for M = 100)"));
  EXPECT_EQ(p.o, std::vector<float>(18, 7.0f));
  EXPECT_EQ(p.lse, std::vector<float>(6, 7.0f));
}

}  // namespace
