// The flash backward with dQ accumulated in the dK/dV pass (FlashTiles::dq_in_dkdv): counted ==
// predicted in words and lines, dense and over masks, for odd sizes and every M from the minimum;
// the peak is the predicted resident words; the gradients agree with the fp64 reference and with
// the two-pass backward; any number of workers gives the same bits; query tiles no key tile
// visits get dQ = 0. A 16-bit dq: flash_fused_16bit_test.cpp. The planner's choice of the form:
// tests/unit/sparse_planner_test.cpp and the API test at the end.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "support/flash_runs.hpp"
#include "support/reference_fixtures.hpp"

#include <spattn/attention.hpp>

#include <sparse_formats/patterns.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::Ledger;
using spattn::io::WordKind;
using spattn::testing::HeadFixture;
using spattn::testing::pattern_of;
using Mask = sparse_formats::CsrPattern<int64_t>;

IoCount words_of(const Ledger& ledger, WordKind kind) {
  const auto t = ledger.total(kind);
  return {t.reads, t.writes};
}
IoCount lines_of(const Ledger& ledger, WordKind kind) {
  const auto t = ledger.total_lines(kind);
  return {t.reads, t.writes};
}

// Hand tiles of a fused backward: D pre-pass tiles of bq rows, key tiles of ck, query tiles of cq.
FlashTiles fused(int64_t bq, int64_t cq, int64_t ck) { return FlashTiles{bq, 0, cq, ck, true}; }

// The fp64 reference's gradients within tolerance, over `mask` (nullptr: every pair).
void expect_near_reference(const HeadFixture& head, const Mask* mask) {
  const auto expected = mask != nullptr ? spattn::testing::reference_of(head, mask->view())
                                        : spattn::testing::reference_of(head);
  spattn::testing::expect_backward_near(head, expected, head.shape.seqlen_k + head.shape.head_dim);
}

// One fused backward at M with `tiles`, counted in lines of L words: words, lines and the peak as
// predicted, the gradients near the reference.
void check_fused(const std::string& what, const HeadShape& s, const Mask* mask, const FlashTiles& tiles,
                 int64_t cache_words, int64_t line_words) {
  SCOPED_TRACE(what + ": " + std::to_string(s.seqlen_q) + " x " + std::to_string(s.seqlen_k) + ", d " +
               std::to_string(s.head_dim) + ", d_v " + std::to_string(s.head_dim_v) + ", M " +
               std::to_string(cache_words) + ", L " + std::to_string(line_words));
  HeadFixture head(s);
  const auto masking = mask != nullptr ? FlashMasking::block_sparse : FlashMasking::dense;
  const FlashTiles fwd = flash_tiles(s, std::max(cache_words, flash_min_cache_words(s, Pass::forward, masking)),
                                     Pass::forward, masking);
  std::unique_ptr<FlashMask> fwd_mask, bwd_mask;
  if (mask != nullptr) {
    fwd_mask = std::make_unique<FlashMask>(build_flash_mask(mask->view(), s.seqlen_q, s.seqlen_k, fwd, Pass::forward));
    bwd_mask = std::make_unique<FlashMask>(build_flash_mask(mask->view(), s.seqlen_q, s.seqlen_k, tiles, Pass::backward));
    EXPECT_EQ(bwd_mask->query_rows.num_outer_tiles(), 0);  // the dQ pass's lists are not built
  }
  spattn::testing::run_flash_forward(head, fwd, 1 << 20, fwd_mask.get());
  Ledger ledger(line_words);
  spattn::testing::run_flash_backward(head, tiles, cache_words, bwd_mask.get(), &ledger);
  const FlashWords words = predict_flash_backward_words(s, tiles, bwd_mask.get());
  const FlashWords lines = predict_flash_backward_lines(s, tiles, bwd_mask.get(), line_words);
  EXPECT_EQ(words_of(ledger, WordKind::value), words.values);
  EXPECT_EQ(words_of(ledger, WordKind::index), words.indices);
  EXPECT_EQ(lines_of(ledger, WordKind::value), lines.values);
  EXPECT_EQ(lines_of(ledger, WordKind::index), lines.indices);
  EXPECT_EQ(ledger.peak_resident(), flash_resident_words(s, tiles, Pass::backward, masking));
  EXPECT_LE(ledger.peak_resident(), cache_words);
  expect_near_reference(head, mask);
}

TEST(FlashFusedBackward, HandCountedDenseTwoByTwoTiles) {
  // n = 4, d = e = 2, key tiles of 2, query tiles of 2: 2 key tiles each visit both query tiles.
  // D pre-pass: O, dO read (2 x 4 x 2 = 16), D written (4). dK/dV pass: K, V once (4 x 4 = 16);
  // per (key tile, query tile) Q, dO, LSE, D (2 x 6 = 12), 4 visits: 48. dQ: 4 visits write
  // 2 x 2 words each (16); the 2 later visits read it back (8). dK, dV written (16).
  const HeadShape s{4, 4, 2, 2};
  const FlashTiles tiles = fused(4, 2, 2);
  EXPECT_EQ(predict_flash_backward(s, tiles), (IoCount{16 + 16 + 48 + 8, 4 + 16 + 16}));
  HeadFixture head(s);
  spattn::testing::run_flash_forward(head, flash_tiles(s, 1000, Pass::forward), 1000);
  const Ledger ledger = spattn::testing::count_flash_backward(head, tiles, 1000);
  EXPECT_EQ(ledger.reads(), 16 + 16 + 48 + 8);
  EXPECT_EQ(ledger.writes(), 4 + 16 + 16);
  expect_near_reference(head, nullptr);
}

TEST(FlashFusedBackward, CountedEqualsPredictedDenseAtOddSizes) {
  for (const HeadShape& s : {HeadShape{1, 1, 8, 8}, HeadShape{7, 7, 3, 5}, HeadShape{97, 61, 16, 8},
                             HeadShape{61, 97, 8, 16}, HeadShape{257, 257, 16, 16}}) {
    const int64_t lo = flash_min_cache_words(s, Pass::backward, FlashMasking::dense, true);
    for (const int64_t m : {lo, 4 * lo, 64 * lo}) {
      for (const int64_t line_words : {int64_t{1}, int64_t{16}}) {
        check_fused("dense, the planner's tiles", s, nullptr, fused_flash_tiles(s, m), m, line_words);
      }
    }
    check_fused("dense, hand tiles 3 / 2 / 5", s, nullptr, fused(3, 2, 5), 1 << 20, 16);
  }
}

TEST(FlashFusedBackward, CountedEqualsPredictedOverMasks) {
  const std::vector<std::string> specs = {"causal", "sliding_window:w=16", "random:p=0.1,seed=2",
                                          "documents:num_docs=3,causal=1", "bigbird:block=16,w=1,g=1,r=2,seed=3",
                                          "prefix_lm:p=40", "dilated_window:w=6,dilation=3"};
  for (const HeadShape& s : {HeadShape{97, 97, 8, 8}, HeadShape{257, 257, 16, 8}, HeadShape{7, 7, 4, 4}}) {
    for (const std::string& spec : specs) {
      const Mask mask = pattern_of(spec, s.seqlen_q, s.seqlen_k);
      const int64_t lo = flash_min_cache_words(s, Pass::backward, FlashMasking::block_sparse, true);
      for (const int64_t m : {lo, 8 * lo, 64 * lo}) {
        for (const int64_t line_words : {int64_t{1}, int64_t{16}}) {
          check_fused(spec, s, &mask, fused_flash_tiles(s, m, FlashMasking::block_sparse), m, line_words);
        }
      }
    }
  }
  // Rectangular (bottom-right aligned causal), and a mask whose first rows attend nothing.
  const HeadShape wide{61, 97, 8, 8};
  const Mask causal = pattern_of("causal", 61, 97);
  check_fused("causal 61 x 97", wide, &causal, fused(5, 4, 7), 1 << 20, 16);
  const HeadShape s{97, 97, 8, 8};
  Mask late = Mask::empty(97, 97);
  for (int64_t r = 0; r < 97; ++r) {
    if (r >= 40) {
      for (int64_t c = 0; c <= r; c += 3) late.col_idx.push_back(c);
    }
    late.row_ptr[static_cast<size_t>(r) + 1] = static_cast<int64_t>(late.col_idx.size());
  }
  check_fused("rows 0 .. 39 empty", s, &late, fused(8, 8, 16), 1 << 20, 16);
}

// Query tiles no key tile visits: dQ written 0 (the fixture poisons it with NaN), once.
TEST(FlashFusedBackward, UnvisitedQueryTilesGetZeroGradients) {
  const HeadShape s{64, 64, 8, 8};
  Mask upper = Mask::empty(64, 64);  // rows 32 .. 63 attend nothing
  for (int64_t r = 0; r < 64; ++r) {
    if (r < 32) {
      for (int64_t c = 0; c < 64; c += 2) upper.col_idx.push_back(c);
    }
    upper.row_ptr[static_cast<size_t>(r) + 1] = static_cast<int64_t>(upper.col_idx.size());
  }
  const FlashTiles tiles = fused(16, 8, 16);
  HeadFixture head(s);
  const FlashMask fwd_mask = build_flash_mask(upper.view(), 64, 64, flash_tiles(s, 4000, Pass::forward, FlashMasking::block_sparse), Pass::forward);
  spattn::testing::run_flash_forward(head, fwd_mask.tiles, 4000, &fwd_mask);
  const FlashMask bwd_mask = build_flash_mask(upper.view(), 64, 64, tiles, Pass::backward);
  spattn::testing::run_flash_backward(head, tiles, 100000, &bwd_mask);
  for (int64_t i = 32 * 8; i < 64 * 8; ++i) ASSERT_EQ(head.dq[static_cast<size_t>(i)], 0.0f) << i;
  spattn::testing::expect_nontrivial_outputs(head);
  expect_near_reference(head, &upper);
}

// The same bits for 1, 2, 3 and 5 workers, several heads, dense and masked; the summed ledgers
// are the heads times the prediction. Against the two-pass backward: within fp32 rounding.
TEST(FlashFusedBackward, AnyNumberOfWorkersGivesTheSameBits) {
  const HeadShape s{257, 257, 16, 16};
  const int64_t m = 3000;
  for (const char* spec : {"full", "causal", "sliding_window:w=40", "random:p=0.2,seed=7"}) {
    SCOPED_TRACE(spec);
    const bool dense = std::string(spec) == "full";
    const Mask mask = dense ? Mask::empty(1, 1) : pattern_of(spec, 257, 257);
    const auto masking = dense ? FlashMasking::dense : FlashMasking::block_sparse;
    const FlashTiles tiles = fused_flash_tiles(s, m, masking);
    std::unique_ptr<FlashMask> fm;
    if (!dense) fm = std::make_unique<FlashMask>(build_flash_mask(mask.view(), 257, 257, tiles, Pass::backward));
    std::vector<std::vector<float>> first;
    for (const int threads : {1, 2, 3, 5}) {
      std::vector<HeadFixture> heads;
      for (uint32_t h = 0; h < 3; ++h) heads.emplace_back(s, 10 * h + 1, 0.5f);
      std::vector<HeadBackward> views;
      for (HeadFixture& head : heads) {
        head.o = spattn::testing::random_floats(257 * 16, 99);  // any O: D = rowsum(dO o O)
        head.lse.assign(257, 3.0f);
        views.push_back(head.backward());
      }
      Ledger ledger;
      flash_backward_heads(FlashTeam{threads, m, &ledger}, views, tiles, fm.get());
      EXPECT_EQ(ledger.reads(), 3 * predict_flash_backward(s, tiles, fm.get()).reads);
      EXPECT_EQ(ledger.writes(), 3 * predict_flash_backward(s, tiles, fm.get()).writes);
      std::vector<std::vector<float>> got;
      for (const HeadFixture& head : heads) {
        got.push_back(head.dq);
        got.push_back(head.dk);
        got.push_back(head.dv);
      }
      if (first.empty()) {
        first = got;
        // The two-pass backward over the same inputs: the same sums in another order.
        std::vector<HeadFixture> again;
        for (uint32_t h = 0; h < 3; ++h) {
          again.push_back(heads[h]);
          again.back().poison_backward(0.5f);
        }
        std::vector<HeadBackward> again_views;
        for (HeadFixture& head : again) again_views.push_back(head.backward());
        const FlashTiles two_pass = flash_tiles(s, m, Pass::backward, masking);
        std::unique_ptr<FlashMask> two_mask;
        if (!dense) {
          two_mask = std::make_unique<FlashMask>(build_flash_mask(mask.view(), 257, 257, two_pass, Pass::backward));
        }
        flash_backward_heads(FlashTeam{2, m, nullptr}, again_views, two_pass, two_mask.get());
        for (size_t h = 0; h < 3; ++h) {
          for (const auto& [a, b] : {std::pair{&again[h].dq, &heads[h].dq}, std::pair{&again[h].dk, &heads[h].dk},
                                     std::pair{&again[h].dv, &heads[h].dv}}) {
            const double scale = spattn::testing::max_abs(spattn::testing::widen(*a));
            EXPECT_GT(scale, 1e-3);
            EXPECT_LE(spattn::testing::max_abs_error(*b, spattn::testing::widen(*a)), 1e-5 * scale);
          }
        }
      } else {
        EXPECT_EQ(got, first) << threads << " workers";
      }
    }
  }
}

TEST(FlashFusedBackward, TilesWithoutTheFusedFormNeedBlockK) {
  const HeadShape s{8, 8, 4, 4};
  HeadFixture head(s);
  spattn::io::FastMemory fast(100000, nullptr, "flash backward");
  EXPECT_THAT([&] { flash_backward(fast, head.backward(), FlashTiles{8, 0, 4, 4, false}); },
              ::testing::ThrowsMessage<spattn::InvalidArgument>(::testing::HasSubstr("block_k")));
}

// Through the API: a backward planned for time accumulates dQ in its dK/dV pass for every element
// type (a 16-bit dQ in float32 sums: flash_fused_16bit_test.cpp; its API runs count what their plans
// predict: element_types_test.cpp).
TEST(FlashFusedBackward, TheApiRunsItForEveryElementType) {
  spattn::AttentionShape shape{1, 2, 2, 256, 256, 32, 32};
  spattn::AttentionOptions options;
  options.cache_words = 8192;
  for (const char* spec : {"full", "causal"}) {
    const spattn::Mask mask = std::string(spec) == "full" ? spattn::Mask::full(256, 256)
                                                          : spattn::Mask::from_spec(spec, 256, 256);
    for (const auto element : {spattn::ElementType::fp32, spattn::ElementType::bf16, spattn::ElementType::fp16}) {
      shape.element = element;
      const auto plan = spattn::plan_attention(shape, {mask}, spattn::Pass::backward, options);
      EXPECT_THAT(plan.flash.tiles, ::testing::HasSubstr("dQ in the dK/dV pass")) << spec;
    }
  }
}

}  // namespace
