// The block-sparse flash schedule's word counts: counted == predicted exactly, value words and
// index words apart, over the pattern library, empty and tiny masks and several M; every index
// word is mask structure; the peak resident words are predicted exactly and never exceed M; the
// masked tile choice fits and is maximal; a full mask moves at most 1.25x the dense schedule's
// words. How the words scale with n and across patterns: block_sparse_flash_io_scaling_test.cpp.
// Numerics: tests/oracle/block_sparse_flash_test.cpp. The printed numbers are quoted in
// docs/block_sparse.md.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "support/flash_runs.hpp"
#include "support/reference_fixtures.hpp"

#include <sparse_formats/patterns.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::io::WordKind;
using spattn::testing::count_flash_backward;
using spattn::testing::count_flash_forward;
using spattn::testing::HeadFixture;
using spattn::testing::pattern_of;
using ::testing::HasSubstr;
using Mask = sparse_formats::CsrPattern<int64_t>;
constexpr FlashMasking kMasked = FlashMasking::block_sparse;

IoCount counted(const Ledger& ledger, WordKind kind) {
  const auto traffic = ledger.total(kind);
  return {traffic.reads, traffic.writes};
}

std::string describe(const std::string& spec, const HeadShape& s, int64_t cache_words) {
  return spec + ": n_q " + std::to_string(s.seqlen_q) + ", n_k " + std::to_string(s.seqlen_k) +
         ", d " + std::to_string(s.head_dim) + ", d_v " + std::to_string(s.head_dim_v) + ", M " +
         std::to_string(cache_words);
}

// Every index word moved is mask structure, read only; values and indices match the prediction
// apart; the peak is the predicted resident words and fits.
void check_ledger(const Ledger& ledger, const FlashWords& predicted, int64_t resident, int64_t cache_words) {
  EXPECT_EQ(counted(ledger, WordKind::value), predicted.values);
  EXPECT_EQ(counted(ledger, WordKind::index), predicted.indices);
  EXPECT_EQ(ledger.traffic(Operand::mask, WordKind::index).reads, predicted.indices.reads);
  EXPECT_EQ(ledger.traffic(Operand::mask, WordKind::value).total(), 0);
  EXPECT_EQ(predicted.indices.writes, 0);
  EXPECT_EQ(ledger.peak_resident(), resident);
  EXPECT_LE(ledger.peak_resident(), cache_words);
}

// Lines, values and indices apart, against the prediction.
void check_lines(const Ledger& ledger, const FlashWords& predicted) {
  const auto lines = [&](WordKind kind) {
    const auto t = ledger.total_lines(kind);
    return IoCount{t.reads, t.writes};
  };
  EXPECT_EQ(lines(WordKind::value), predicted.values);
  EXPECT_EQ(lines(WordKind::index), predicted.indices);
}

void check_counts(const std::string& spec, const Mask& mask, const HeadShape& s, int64_t cache_words,
                  int64_t line_words = spattn::io::kDefaultLineWords) {
  SCOPED_TRACE(describe(spec, s, cache_words) + ", L " + std::to_string(line_words));
  HeadFixture head(s);
  const FlashTiles fwd = flash_tiles(s, cache_words, Pass::forward, kMasked);
  const FlashMask fwd_mask = build_flash_mask(mask.view(), s.seqlen_q, s.seqlen_k, fwd, Pass::forward);
  const Ledger forward = count_flash_forward(head, fwd, cache_words, &fwd_mask, line_words);
  check_ledger(forward, predict_flash_forward_words(s, fwd, &fwd_mask),
               flash_resident_words(s, fwd, Pass::forward, kMasked), cache_words);
  check_lines(forward, predict_flash_forward_lines(s, fwd, &fwd_mask, line_words));

  const FlashTiles bwd = flash_tiles(s, cache_words, Pass::backward, kMasked);
  const FlashMask bwd_mask = build_flash_mask(mask.view(), s.seqlen_q, s.seqlen_k, bwd, Pass::backward);
  const FlashWords predicted = predict_flash_backward_words(s, bwd, &bwd_mask);
  const Ledger backward = count_flash_backward(head, bwd, cache_words, &bwd_mask, line_words);
  check_ledger(backward, predicted, flash_resident_words(s, bwd, Pass::backward, kMasked), cache_words);
  check_lines(backward, predict_flash_backward_lines(s, bwd, &bwd_mask, line_words));
  EXPECT_EQ(predict_flash_backward(s, bwd, &bwd_mask), predicted.total());
}

// `points` sizes spaced geometrically from the masked minimum to one tile per sequence.
std::vector<int64_t> cache_sizes(const HeadShape& s, int points) {
  const auto lo = static_cast<double>(flash_min_cache_words(s, Pass::backward, kMasked));
  const int64_t n_q = std::max<int64_t>(s.seqlen_q, 1), n_k = std::max<int64_t>(s.seqlen_k, 1);
  const auto hi = static_cast<double>(std::max(
      flash_resident_words(s, {n_q, n_k, n_q, n_k}, Pass::forward, kMasked),
      flash_resident_words(s, {n_q, n_k, n_q, n_k}, Pass::backward, kMasked)));
  std::vector<int64_t> sizes;
  for (int i = 0; i < points; ++i) {
    sizes.push_back(static_cast<int64_t>(lo * std::pow(hi / lo, i / static_cast<double>(points - 1))));
  }
  sizes.front() = static_cast<int64_t>(lo);
  return sizes;
}

TEST(BlockSparseFlashIo, HandCountedCausalFourByFour) {
  // Causal 4 x 4, tiles of 2: query tile 0 visits key tile 0 (partial: 3 of 4 pairs); query tile
  // 1 visits key tile 0 (full) and key tile 1 (partial). Transposed, key tile 0 visits query tiles
  // 0 (partial) and 1 (full), key tile 1 query tile 1 (partial). d = e = 2, one bit word per tile.
  const HeadShape s{4, 4, 2, 2};
  const Mask mask = pattern_of("causal", 4, 4);
  const FlashTiles tiles{2, 2, 2, 2};
  const FlashMask fwd_mask = build_flash_mask(mask.view(), 4, 4, tiles, Pass::forward);
  // Runs (2 * first tile + partial, count): query tile 0 one partial run, query tile 1 a full run
  // and a partial run (tiles of one kind touch only across kinds here).
  EXPECT_EQ(fwd_mask.query_rows.run_ptr, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(fwd_mask.query_rows.runs, (std::vector<int64_t>{2 * 0 + 1, 1, 2 * 0 + 0, 1, 2 * 1 + 1, 1}));
  EXPECT_EQ(fwd_mask.query_rows.partial_ptr, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(fwd_mask.query_rows.bits, (std::vector<uint64_t>{0b1101, 0b1101}));
  // Forward: Q 4 rows x 2; K, V 2 + 4 rows x 4; O, LSE 4 x 3. Index: 2 headers x 3, 3 runs x 2,
  // 2 bit words.
  const FlashWords forward = predict_flash_forward_words(s, tiles, &fwd_mask);
  EXPECT_EQ(forward.values, (IoCount{8 + 24, 12}));
  EXPECT_EQ(forward.indices, (IoCount{6 + 6 + 2, 0}));
  HeadFixture head(s);
  check_ledger(count_flash_forward(head, tiles, 1000, &fwd_mask), forward,
               flash_resident_words(s, tiles, Pass::forward, kMasked), 1000);
  // Backward: D pre-pass O, dO 4 x 4, D 4; dK/dV pass K, V 4 rows x 4, Q, dO, LSE, D 4 + 2 rows
  // x 6; dQ pass Q, dO, LSE, D 4 rows x 6, K, V 2 + 4 rows x 4. Writes D 4, dK, dV 16, dQ 8.
  const FlashMask bwd_mask = build_flash_mask(mask.view(), 4, 4, tiles, Pass::backward);
  EXPECT_EQ(bwd_mask.key_cols.runs, (std::vector<int64_t>{2 * 0 + 1, 1, 2 * 1 + 0, 1, 2 * 1 + 1, 1}));
  const FlashWords backward = predict_flash_backward_words(s, tiles, &bwd_mask);
  EXPECT_EQ(backward.values, (IoCount{16 + 16 + 36 + 24 + 24, 4 + 16 + 8}));
  EXPECT_EQ(backward.indices, (IoCount{2 * (6 + 6 + 2), 0}));
  check_ledger(count_flash_backward(head, tiles, 1000, &bwd_mask), backward,
               flash_resident_words(s, tiles, Pass::backward, kMasked), 1000);
  // Resident: the dense nest plus 3 + 16 + 1 index words.
  EXPECT_EQ(flash_resident_words(s, tiles, Pass::forward, kMasked),
            flash_resident_words(s, tiles, Pass::forward) + 20);
}

TEST(BlockSparseFlashIo, CountedEqualsPredictedOverThePatternLibraryAndCacheSizes) {
  std::vector<std::string> specs = {"bigbird:block=16,w=1,g=1,r=2,seed=3", "dilated_window:w=6,dilation=3",
                                    "fixed:stride=32,c=4", "global_window:w=8,g=3", "prefix_lm:p=40",
                                    "random:p=0.01,seed=2", "random_blocks:block=8,p=0.3,seed=5",
                                    "sliding_window:w=16", "sliding_window:w=20,causal=1",
                                    "strided:stride=16", "documents:num_docs=3,causal=1"};
  for (const auto& info : sparse_formats::list_patterns()) specs.push_back(info.name);
  for (const HeadShape& s : {HeadShape{257, 257, 8, 8}, HeadShape{97, 257, 4, 12}, HeadShape{257, 97, 16, 8}}) {
    for (const std::string& spec : specs) {
      if (spec.rfind("documents", 0) == 0 && s.seqlen_q != s.seqlen_k) continue;  // needs lengths_k
      const Mask mask = pattern_of(spec, s.seqlen_q, s.seqlen_k);
      for (const int64_t m : cache_sizes(s, 3)) check_counts(spec, mask, s, m);
    }
  }
  for (const auto& info : sparse_formats::list_patterns()) {
    const HeadShape s{600, 600, 8, 8};
    const Mask mask = pattern_of(info.example, 600, 600);
    for (const int64_t m : {1000, 40000}) check_counts(info.example, mask, s, m);
  }
}

TEST(BlockSparseFlashIo, CountedEqualsPredictedOnEmptyTinyAndDegenerateMasks) {
  const HeadShape s{97, 97, 8, 8};
  const auto sizes = cache_sizes(s, 3);
  for (const int64_t m : sizes) {
    check_counts("empty", Mask::empty(97, 97), s, m);
    Mask single = Mask::empty(97, 97);
    single.col_idx = {96};
    for (size_t r = 97; r < single.row_ptr.size(); ++r) single.row_ptr[r] = 1;  // entry (96, 96)
    check_counts("single (96, 96)", single, s, m);
  }
  for (const int64_t n : {1, 7}) {
    const HeadShape t{n, n, 3, 5};
    for (const int64_t m : cache_sizes(t, 3)) check_counts("causal", pattern_of("causal", n, n), t, m);
  }
  for (const HeadShape& t : {HeadShape{0, 7, 4, 4}, HeadShape{7, 0, 4, 4}, HeadShape{0, 0, 4, 4}}) {
    check_counts("empty", Mask::empty(t.seqlen_q, t.seqlen_k), t, 1000);
  }
}

// Lines of other sizes (L = 1: lines are words), head dims of one word (vectors) and of a few
// lines, tiles that start inside lines.
TEST(BlockSparseFlashIo, CountedLinesEqualPredictedForEveryLineSize) {
  for (const HeadShape& s : {HeadShape{97, 97, 1, 1}, HeadShape{97, 257, 20, 33}, HeadShape{130, 130, 64, 64}}) {
    for (const std::string spec : {"causal", "sliding_window:w=9", "random:p=0.1,seed=4", "bigbird:block=8,w=1,g=1,r=1,seed=2"}) {
      const Mask mask = pattern_of(spec, s.seqlen_q, s.seqlen_k);
      for (const int64_t line_words : {1, 2, 3, 8, 16, 32}) {
        for (const int64_t m : cache_sizes(s, 2)) check_counts(spec, mask, s, m, line_words);
      }
    }
  }
}

TEST(BlockSparseFlashIo, EmptyMaskReadsOnlyListHeadersAndWritesTheOutputs) {
  const HeadShape s{257, 257, 8, 8};
  const int64_t m = 2000;
  const FlashTiles fwd = flash_tiles(s, m, Pass::forward, kMasked);
  const FlashMask fwd_mask = build_flash_mask(Mask::empty(257, 257).view(), 257, 257, fwd, Pass::forward);
  const int64_t q_tiles = flash_detail::num_tiles(257, fwd.block_q);
  EXPECT_EQ(predict_flash_forward_words(s, fwd, &fwd_mask).values, (IoCount{0, 257 * 9}));
  EXPECT_EQ(predict_flash_forward_words(s, fwd, &fwd_mask).indices, (IoCount{3 * q_tiles, 0}));
}

TEST(BlockSparseFlashIo, FullMaskMovesTheDenseValueWordsPlusFewIndexWords) {
  // Same tiles: exactly the dense value words. Tiles chosen for a masked run (slightly smaller,
  // to hold the index buffers): at most 1.25x the dense schedule's words, index words included.
  for (const int64_t n : {257, 1024}) {
    const auto full = sparse_formats::full_pattern<int32_t>(n, n);
    for (const int64_t d : {32, 64, 128}) {
      const HeadShape s{n, n, d, d};
      for (const int64_t m : {4 * d * d, 16 * d * d, n * d / 4}) {
        if (m < flash_min_cache_words(s, Pass::backward, kMasked)) continue;
        SCOPED_TRACE(describe("full", s, m));
        for (const Pass pass : {Pass::forward, Pass::backward}) {
          const FlashTiles dense_tiles = flash_tiles(s, m, pass);
          const FlashTiles tiles = flash_tiles(s, m, pass, kMasked);
          const FlashMask same = build_flash_mask(full.view(), n, n, dense_tiles, pass);
          const FlashMask mask = build_flash_mask(full.view(), n, n, tiles, pass);
          const bool fwd = pass == Pass::forward;
          const IoCount dense = fwd ? predict_flash_forward(s, dense_tiles) : predict_flash_backward(s, dense_tiles);
          const FlashWords same_words = fwd ? predict_flash_forward_words(s, dense_tiles, &same)
                                            : predict_flash_backward_words(s, dense_tiles, &same);
          const FlashWords words = fwd ? predict_flash_forward_words(s, tiles, &mask)
                                       : predict_flash_backward_words(s, tiles, &mask);
          EXPECT_EQ(same_words.values, dense);
          const double ratio = static_cast<double>(words.total().total()) / static_cast<double>(dense.total());
          const double index_share = static_cast<double>(words.indices.total()) / static_cast<double>(words.total().total());
          std::printf("full mask n %ld d %ld M %ld %s: masked / dense words = %.4f (index words %.4f of the total)\n",
                      static_cast<long>(n), static_cast<long>(d), static_cast<long>(m), pass_name(pass), ratio, index_share);
          EXPECT_LE(ratio, 1.25);
          EXPECT_GE(ratio, 1.0);
          if (n == 257 && d == 32) {  // and the count agrees (n = 1024 would take a while)
            HeadFixture head(s);
            const Ledger ledger =
                fwd ? count_flash_forward(head, tiles, m, &mask) : count_flash_backward(head, tiles, m, &mask);
            EXPECT_EQ(counted(ledger, WordKind::value), words.values);
            EXPECT_EQ(counted(ledger, WordKind::index), words.indices);
          }
        }
      }
    }
  }
}

TEST(BlockSparseFlashIo, MaskedTileChoiceFitsAndIsMaximalForEveryCacheSize) {
  for (const HeadShape& s : {HeadShape{1000, 1000, 8, 8}, HeadShape{300, 2000, 3, 17}, HeadShape{5, 5, 1, 1}}) {
    for (int64_t m = flash_min_cache_words(s, Pass::backward, kMasked); m < 30000; m += 7) {
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        const FlashTiles t = flash_tiles(s, m, pass, kMasked);
        const std::string where = describe("tiles", s, m);
        ASSERT_LE(flash_resident_words(s, t, pass, kMasked), m) << where;
        ASSERT_GE(t.block_q, 1);
        ASSERT_LE(t.block_q, s.seqlen_q);
        ASSERT_LE(t.block_k, s.seqlen_k);
        if (t.block_q < s.seqlen_q) {
          ASSERT_LE(t.block_k, 16) << where;
          FlashTiles more = t;
          ++more.block_q;
          ASSERT_GT(flash_resident_words(s, more, pass, kMasked), m) << where;
        }
        if (pass == Pass::backward && t.dkdv_block_k < s.seqlen_k) {
          FlashTiles more = t;
          ++more.dkdv_block_k;
          ASSERT_GT(flash_resident_words(s, more, pass, kMasked), m) << where;
        }
      }
    }
  }
}

TEST(BlockSparseFlashIo, MinimumCacheIsTheDenseOnePlusTwentyIndexWords) {
  const HeadShape s{64, 64, 64, 64};
  EXPECT_EQ(flash_min_cache_words(s, Pass::forward, kMasked), 259 + 20);
  EXPECT_EQ(flash_min_cache_words(s, Pass::backward, kMasked), 387 + 20);
  EXPECT_EQ(flash_tiles(s, 407, Pass::backward, kMasked), (FlashTiles{1, 1, 1, 1}));
  try {
    flash_tiles(s, 406, Pass::backward, kMasked);
    ADD_FAILURE() << "expected an error";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("flash backward: M = 406 words is below the minimum 407"));
    EXPECT_THAT(error.what(), HasSubstr("+ 20 words of mask structure"));
  }
  // At the minimum the schedule fills fast memory to the word.
  const Mask mask = pattern_of("sliding_window:w=3", 64, 64);
  const FlashMask fm = build_flash_mask(mask.view(), 64, 64, FlashTiles{1, 1, 1, 1}, Pass::backward);
  HeadFixture head(s);
  EXPECT_EQ(count_flash_backward(head, FlashTiles{1, 1, 1, 1}, 407, &fm).peak_resident(), 407);
}

}  // namespace
