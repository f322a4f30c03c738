// Interval masks (sparse_formats/intervals.hpp): hand-checked cases, the form each spec is built in,
// and every conversion against the pair-by-pair CSR it describes, over the pattern library, its
// compositions and odd sizes.
#include <sparse_formats/convert.hpp>
#include <sparse_formats/error.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>
#include <sparse_formats/validate.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using sparse_formats::CsrPattern;
using sparse_formats::FormatError;
using sparse_formats::IntervalPattern;

namespace {

std::optional<IntervalPattern> intervals_of(const std::string& spec, int64_t n_q, int64_t n_k) {
  return sparse_formats::make_interval_pattern(sparse_formats::parse_pattern_spec(spec), n_q, n_k);
}

CsrPattern<int64_t> pairs_of(const std::string& spec, int64_t n_q, int64_t n_k) {
  return sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(spec), n_q, n_k);
}

void expect_same_bsr(const sparse_formats::BsrMask<int64_t>& a, const sparse_formats::BsrMask<int64_t>& b) {
  EXPECT_EQ(a.blocks.block_row_ptr, b.blocks.block_row_ptr);
  EXPECT_EQ(a.blocks.block_col_idx, b.blocks.block_col_idx);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.partial_slot, b.partial_slot);
  EXPECT_EQ(a.partial_bits, b.partial_bits);
}

std::string validate_message(const IntervalPattern& p) {
  try {
    sparse_formats::validate(p, "mask");
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Intervals, CausalIsOneIntervalPerRow) {
  const auto causal = intervals_of("causal", 4, 4);
  ASSERT_TRUE(causal.has_value());
  EXPECT_EQ(causal->row_ptr, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(causal->begin, (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(causal->end, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(causal->nnz(), 10);
  EXPECT_EQ(causal->memory_bytes(), 8 * (5 + 2 * 4));
}

TEST(Intervals, RectangularCausalIsBottomRightAligned) {
  // 2 queries over 4 keys: pos(i) = i + 2, so row 0 attends keys 0..2 and row 1 all four.
  const auto causal = intervals_of("causal", 2, 4);
  ASSERT_TRUE(causal.has_value());
  EXPECT_EQ(causal->end, (std::vector<int64_t>{3, 4}));
  // 4 queries over 2 keys: the first two rows are empty.
  const auto tall = intervals_of("causal", 4, 2);
  ASSERT_TRUE(tall.has_value());
  EXPECT_EQ(tall->row_ptr, (std::vector<int64_t>{0, 0, 0, 1, 2}));
}

TEST(Intervals, GlobalTokensAndAWindowAreTwoIntervalsWhereTheyDoNotTouch) {
  // w = 1, g = 2 at n = 8, row 6: keys 0, 1 (global) and 5..7 (window).
  const auto mask = intervals_of("global_window:w=1,g=2", 8, 8);
  ASSERT_TRUE(mask.has_value());
  const int64_t first = mask->row_begin(6);
  ASSERT_EQ(mask->row_end(6) - first, 2);
  EXPECT_EQ(std::make_pair(mask->begin[first], mask->end[first]), std::make_pair(int64_t{0}, int64_t{2}));
  EXPECT_EQ(std::make_pair(mask->begin[first + 1], mask->end[first + 1]), std::make_pair(int64_t{5}, int64_t{8}));
  // Row 3's window [2, 5) touches the global keys: one interval [0, 5).
  ASSERT_EQ(mask->row_end(3) - mask->row_begin(3), 1);
  EXPECT_EQ(mask->end[mask->row_begin(3)], 5);
}

TEST(Intervals, ElementWiseMasksStayPairs) {
  EXPECT_FALSE(intervals_of("random:p=0.3,seed=1", 64, 64).has_value());
  EXPECT_FALSE(intervals_of("dilated_window:w=8,dilation=2", 64, 64).has_value());
  EXPECT_FALSE(intervals_of("strided:stride=4", 64, 64).has_value());
  EXPECT_FALSE(intervals_of("causal & random:p=0.5", 64, 64).has_value());  // one element-wise operand
  EXPECT_TRUE(intervals_of("sliding_window:w=0", 64, 64).has_value());      // a range, however short
  EXPECT_TRUE(intervals_of("causal", 2, 2).has_value());
  EXPECT_TRUE(intervals_of("strided:stride=64", 64, 64).has_value());        // residues in long runs
  EXPECT_TRUE(intervals_of("sliding_window:w=2", 64, 64).has_value());
  EXPECT_TRUE(intervals_of("bigbird:block=8,seed=2", 64, 64).has_value());
  EXPECT_TRUE(intervals_of("sliding_window:w=4 | global_window:w=1,g=3", 64, 64).has_value());
}

TEST(Intervals, ValidateNamesTheRowTheIntervalAndTheValues) {
  IntervalPattern p(2, 10, {0, 2, 3}, {0, 5, 3}, {4, 8, 2});
  EXPECT_EQ(validate_message(p), "mask: row 1, interval 0 = [3, 2) must satisfy 0 <= begin < end <= num_cols = 10");
  p.end[2] = 11;
  EXPECT_EQ(validate_message(p), "mask: row 1, interval 0 = [3, 11) must satisfy 0 <= begin < end <= num_cols = 10");
  p.end[2] = 9;
  EXPECT_EQ(validate_message(p), "");
  p.begin[1] = 3;  // overlaps [0, 4)
  EXPECT_EQ(validate_message(p),
            "mask: row 0, interval 1 = [3, 8) starts before the previous one [0, 4) ends (intervals must ascend "
            "without overlapping)");
  p.begin[1] = 4;  // touching is allowed: the same pairs as one interval
  EXPECT_EQ(validate_message(p), "");
  p.row_ptr = {0, 3, 2};
  EXPECT_EQ(validate_message(p), "mask: row_ptr[2] = 2 < row_ptr[1] = 3 (row_ptr must not decrease)");
  p.row_ptr = {0, 2};
  EXPECT_EQ(validate_message(p), "mask: row_ptr has 2 entries, expected num_rows + 1 = 3");
  p.row_ptr = {0, 2, 2};
  EXPECT_EQ(validate_message(p), "mask: row_ptr[2] = 2 but there are 3 intervals");
}

TEST(Intervals, AMaskTooLargeForTheMachineIsRefusedBeforeAllocating) {
  // 2^40 rows need 8 TiB of row offsets: refused by size, at once.
  const int64_t n = int64_t{1} << 40;
  try {
    intervals_of("causal", n, n);
    FAIL() << "expected a FormatError";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("row_ptr (seqlen_q + 1 offsets) needs"), std::string::npos) << e.what();
  }
}

TEST(Intervals, ARandomMaskTooLargeForTheMachineIsRefusedBeforeAllocating) {
  // 10^9 x 10^9 at p = 0.5: 5 x 10^17 expected pairs, refused from the spec alone.
  for (const char* spec : {"random:p=0.5", "random:p=0.5,causal=1"}) {
    try {
      pairs_of(spec, 1000000000, 1000000000);
      FAIL() << "expected a FormatError for " << spec;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("physical memory"), std::string::npos) << e.what();
    }
  }
}

TEST(Intervals, CausalAtAMillionTokensCostsItsRows) {
  const int64_t n = int64_t{1} << 20;
  const auto causal = intervals_of("causal", n, n);
  ASSERT_TRUE(causal.has_value());
  EXPECT_EQ(causal->num_intervals(), n);
  EXPECT_EQ(causal->nnz(), n * (n + 1) / 2);
  EXPECT_LE(causal->memory_bytes(), 32 * n);
  const auto documents = intervals_of("documents:num_docs=64,causal=1", n, n);
  ASSERT_TRUE(documents.has_value());
  EXPECT_LE(documents->memory_bytes(), 32 * n);
}

// Every conversion equals the CSR route, over the pattern library, compositions and odd shapes.
TEST(Intervals, EveryConversionEqualsThePairs) {
  const std::vector<std::string> specs = {
      "full", "causal", "sliding_window:w=3", "sliding_window:w=5,causal=1", "global_window:w=2,g=3",
      "global_window:w=2,g=3,causal=1", "documents:num_docs=3", "documents:num_docs=4,causal=1",
      "prefix_lm:p=5", "bigbird:block=4,w=1,g=1,r=2,seed=3", "random_blocks:block=3,p=0.4,seed=2",
      "fixed:stride=8,c=0", "fixed:stride=16,c=8", "fixed:stride=16,c=8,causal=0", "strided:stride=64",
      "strided:stride=64,causal=0", "dilated_window:w=3,dilation=1",
      "sliding_window:w=4 & causal", "sliding_window:w=2 | global_window:w=1,g=2",
      "(documents:num_docs=3 | prefix_lm:p=4) & causal"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 7}, {97, 97}, {257, 257}, {33, 57},
                                                           {57, 33}, {0, 5}, {5, 0}};
  int compared = 0;
  for (const std::string& spec : specs) {
    for (const auto& [n_q, n_k] : shapes) {
      SCOPED_TRACE(spec + " at " + std::to_string(n_q) + " x " + std::to_string(n_k));
      CsrPattern<int64_t> pairs;
      try {
        pairs = pairs_of(spec, n_q, n_k);
      } catch (const FormatError& e) {  // (documents need a token per document) the same refusal
        EXPECT_THROW(intervals_of(spec, n_q, n_k), FormatError);
        continue;
      }
      const auto intervals = intervals_of(spec, n_q, n_k);
      // Residue classes (strided, fixed with summaries) are intervals only where their runs are long.
      const bool residues = spec.rfind("strided", 0) == 0 || spec.find(",c=8") != std::string::npos;
      if (!intervals.has_value() && residues) continue;
      ASSERT_TRUE(intervals.has_value());
      ASSERT_EQ(validate_message(*intervals), "");
      const CsrPattern<int64_t> expanded = sparse_formats::intervals_to_csr<int64_t>(*intervals);
      ASSERT_EQ(expanded.row_ptr, pairs.row_ptr);
      ASSERT_EQ(expanded.col_idx, pairs.col_idx);
      EXPECT_EQ(intervals->nnz(), pairs.nnz());
      const IntervalPattern back = sparse_formats::csr_to_intervals(pairs.view());  // canonical: the same arrays
      EXPECT_EQ(back.row_ptr, intervals->row_ptr);
      EXPECT_EQ(back.begin, intervals->begin);
      EXPECT_EQ(back.end, intervals->end);
      for (int64_t width : {1, 5, 64, 300}) {
        EXPECT_EQ(sparse_formats::render_mask_blocks(*intervals, width), sparse_formats::render_mask_blocks(pairs.view(), width));
      }
      for (int64_t bm : {1, 2, 3, 8, 64}) {
        for (int64_t bn : {1, 3, 4, 16, 100}) {
          SCOPED_TRACE("blocks " + std::to_string(bm) + " x " + std::to_string(bn));
          const auto blocks = sparse_formats::intervals_to_bsr_mask<int64_t>(*intervals, bm, bn);
          expect_same_bsr(blocks, sparse_formats::csr_to_bsr_mask(pairs.view(), bm, bn));
          const sparse_formats::MaskStats a = sparse_formats::mask_stats(*intervals, bm, bn), b = sparse_formats::mask_stats(blocks);
          EXPECT_EQ(std::make_tuple(a.nnz, a.empty_rows, a.max_row_length, a.stored_blocks, a.full_blocks, a.partial_blocks,
                                    a.empty_block_rows, a.density, a.block_density),
                    std::make_tuple(b.nnz, b.empty_rows, b.max_row_length, b.stored_blocks, b.full_blocks, b.partial_blocks,
                                    b.empty_block_rows, b.density, b.block_density));
          const IntervalPattern rows = sparse_formats::bsr_mask_to_intervals(blocks);  // and back, canonical
          EXPECT_EQ(rows.row_ptr, intervals->row_ptr);
          EXPECT_EQ(rows.begin, intervals->begin);
          EXPECT_EQ(rows.end, intervals->end);
          ++compared;
        }
      }
      // Union and intersection with causal against the CSR merges.
      const auto causal = intervals_of("causal", n_q, n_k);
      const CsrPattern<int64_t> causal_pairs = pairs_of("causal", n_q, n_k);
      EXPECT_EQ(sparse_formats::intervals_to_csr<int64_t>(sparse_formats::interval_union(*intervals, *causal)).col_idx,
                sparse_formats::pattern_union(pairs.view(), causal_pairs.view()).col_idx);
      EXPECT_EQ(
          sparse_formats::intervals_to_csr<int64_t>(sparse_formats::interval_intersection(*intervals, *causal)).col_idx,
          sparse_formats::pattern_intersection(pairs.view(), causal_pairs.view()).col_idx);
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(Intervals, ABlockMasksRowsAreItsFullBlocksAndItsPartialBlocksRuns) {
  // 5 x 7 at blocks of 3 x 4: block row 0 stores block 0 (partial: its row 1 attends keys 1-2) and
  // block 1 (full, clipped to keys 4-6); block row 1 (rows 3-4) stores block 0 full.
  sparse_formats::BsrMask<int32_t> mask;
  mask.blocks.num_rows = 5;
  mask.blocks.num_cols = 7;
  mask.blocks.block_m = 3;
  mask.blocks.block_n = 4;
  mask.blocks.block_row_ptr = {0, 2, 3};
  mask.blocks.block_col_idx = {0, 1, 0};
  mask.kind = {sparse_formats::BlockKind::partial, sparse_formats::BlockKind::full, sparse_formats::BlockKind::full};
  mask.partial_slot = {0, -1, -1};
  mask.partial_bits = {(uint64_t{1} << 5) | (uint64_t{1} << 6)};  // element (1, 1) and (1, 2)
  sparse_formats::validate(mask, "mask");
  const IntervalPattern rows = sparse_formats::bsr_mask_to_intervals(mask);
  EXPECT_EQ(rows.row_ptr, (std::vector<int64_t>{0, 1, 3, 4, 5, 6}));
  EXPECT_EQ(rows.begin, (std::vector<int64_t>{4, 1, 4, 4, 0, 0}));
  EXPECT_EQ(rows.end, (std::vector<int64_t>{7, 3, 7, 7, 4, 4}));
  EXPECT_EQ(validate_message(rows), "");
}

TEST(Intervals, EveryBlockMaskOfElementPatternsHasThePatternsRows) {
  for (const std::string& spec :
       std::vector<std::string>{"random:p=0.3,seed=1", "random:p=0.7,seed=2", "dilated_window:w=4,dilation=2"}) {
    for (const auto& [n_q, n_k] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 7}, {97, 97}, {257, 33}}) {
      const CsrPattern<int64_t> pairs = pairs_of(spec, n_q, n_k);
      const IntervalPattern expected = sparse_formats::csr_to_intervals(pairs.view());
      for (int64_t block : {1, 3, 8, 64}) {
        SCOPED_TRACE(spec + " " + std::to_string(n_q) + " x " + std::to_string(n_k) + " block " + std::to_string(block));
        const auto blocks = sparse_formats::csr_to_bsr_mask(sparse_formats::convert_index<int32_t>(pairs.view()).view(),
                                                            block, block + 1);
        const IntervalPattern rows = sparse_formats::bsr_mask_to_intervals(blocks);
        EXPECT_EQ(rows.row_ptr, expected.row_ptr);
        EXPECT_EQ(rows.begin, expected.begin);
        EXPECT_EQ(rows.end, expected.end);
      }
    }
  }
}

TEST(Intervals, ReblockingALongCausalMaskEqualsThePairs) {
  // 4099 rows: edge tiles on both sides, at the tiles flash uses.
  const auto intervals = intervals_of("causal", 4099, 4099);
  const CsrPattern<int64_t> pairs = pairs_of("causal", 4099, 4099);
  for (int64_t block : {32, 64, 96}) {
    expect_same_bsr(sparse_formats::intervals_to_bsr_mask<int64_t>(*intervals, block, 2 * block),
                    sparse_formats::csr_to_bsr_mask(pairs.view(), block, 2 * block));
  }
}

TEST(Intervals, CompositionsOfDifferentShapesAreRefused) {
  const auto a = intervals_of("causal", 4, 4), b = intervals_of("causal", 4, 5);
  EXPECT_THROW(sparse_formats::interval_union(*a, *b), FormatError);
  EXPECT_THROW(sparse_formats::interval_intersection(*a, *b), FormatError);
}
