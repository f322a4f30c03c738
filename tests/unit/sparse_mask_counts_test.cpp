// The mask counts the planner prices small_cache with (schedules/sparse_small_cache/sparse_mask_counts.hpp), read
// from the CSR alone, against the schedule's prepared mask (copy + transpose) and by hand; both
// ways of counting (entries, runs of consecutive keys) agree.
#include "schedules/sparse_small_cache/sparse_mask_counts.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"
#include "plan/sparse_small_cache_tile_choice.hpp"

#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <optional>

#include <string>
#include <vector>

using spattn::schedules::SparseMaskCounts;
using spattn::schedules::SparseSmallCacheMask;

TEST(SparseMaskCounts, HandCountedMask) {
  // Rows: {0, 1, 3}, {}, {2, 3}: runs [0, 2) [3, 4) | | [2, 4).
  const std::vector<int64_t> row_ptr = {0, 3, 3, 5}, col_idx = {0, 1, 3, 2, 3};
  const SparseMaskCounts counts({3, 4, row_ptr.data(), col_idx.data()});
  EXPECT_EQ(counts.nnz(), 5);
  EXPECT_EQ(counts.nonempty_rows(), 2);
  EXPECT_EQ(counts.nonempty_cols(), 4);
  EXPECT_EQ(counts.touched_keys(1), 5);     // 3 + 0 + 2
  EXPECT_EQ(counts.touched_keys(2), 3 + 2);  // rows {0, 1}: keys 0, 1, 3; row {2}: 2, 3
  EXPECT_EQ(counts.touched_keys(3), 4);
  EXPECT_EQ(counts.touched_queries(1), 5);  // key blocks per row: 3, 0, 2
  EXPECT_EQ(counts.touched_queries(2), 2 + 0 + 1);
  EXPECT_EQ(counts.touched_queries(4), 1 + 0 + 1);
}

TEST(SparseMaskCounts, GathersHandCounted) {
  // The same mask: CSR positions 0 (0, 0), 1 (0, 1), 2 (0, 3), 3 (2, 2), 4 (2, 3). A key block's
  // positions in order, one load per piece of `run` positions (cut at multiples of run) that holds
  // one, the piece's words clipped at nnz = 5.
  const std::vector<int64_t> row_ptr = {0, 3, 3, 5}, col_idx = {0, 1, 3, 2, 3};
  const SparseMaskCounts counts({3, 4, row_ptr.data(), col_idx.data()});
  const auto expect = [&](int64_t block_keys, int64_t run, int64_t loads, int64_t words) {
    const SparseMaskCounts::Gathers gathers = counts.gathers(block_keys, run);
    EXPECT_EQ(gathers.loads, loads) << block_keys << " keys, run " << run;
    EXPECT_EQ(gathers.words, words) << block_keys << " keys, run " << run;
  };
  expect(1, 1, 5, 5);                  // every value alone
  expect(3, 1, 5, 5);
  expect(2, 2, 1 + 2, 2 + (2 + 1));    // keys {0, 1}: {0, 1}; {2, 3}: {2, 3}, {4}
  expect(4, 4, 2, 4 + 1);              // one block: {0..3}, {4}
  expect(2, 4, 1 + 2, 4 + (4 + 1));    // keys {0, 1}: {0..3}; {2, 3}: {0..3}, {4}
  expect(1, 4, 1 + 1 + 1 + 2, 4 * 4 + 1);  // key 3 holds positions 2 and 4
  expect(2, 4, 3, 9);                  // remembered: the same again
}

namespace {

// The gathers by their rule, entry by entry: key block b's walk meets its entries in CSR order and
// loads the piece of `run` positions holding an entry unless it loaded that piece last.
SparseMaskCounts::Gathers walk_gathers(const sparse_formats::CsrPatternView<int64_t>& csr, int64_t block_keys,
                                       int64_t run) {
  const int64_t nnz = csr.nnz();
  std::vector<int64_t> held((csr.num_cols + block_keys - 1) / block_keys, -1);
  SparseMaskCounts::Gathers gathers;
  for (int64_t i = 0; i < csr.num_rows; ++i) {
    for (int64_t p = csr.row_ptr[i]; p < csr.row_ptr[i + 1]; ++p) {
      int64_t& piece = held[static_cast<size_t>(csr.col_idx[p] / block_keys)];
      if (piece == p / run) continue;
      piece = p / run;
      ++gathers.loads;
      gathers.words += std::min((piece + 1) * run, nnz) - piece * run;
    }
  }
  return gathers;
}

}  // namespace

// The runs' closed form (windows, documents, blocks: a few runs of consecutive keys a row), the
// segment walk (unstructured masks) and an interval mask's counts all equal the walk entry by
// entry, for every block size and run: pieces split by block boundaries, pieces a block holds
// from the row before, several blocks loading the last, clipped piece.
TEST(SparseMaskCounts, GathersEqualAWalkOfEveryEntry) {
  const std::vector<std::string> specs = {
      "causal", "sliding_window:w=7", "sliding_window:w=1", "documents:lengths=30/0/40/27,causal=1",
      "bigbird:block=8,w=1,g=1,r=2,seed=3", "dilated_window:w=5,dilation=3", "fixed:stride=16,c=3",
      "random:p=0.1,seed=4", "random:p=0.6,seed=5", "sliding_window:w=3 | random:p=0.02,seed=6", "full",
      // Rows repeating the two before them, in whole lines (the count takes the row before's).
      "bigbird:block=16,w=1,g=1,r=2,seed=3", "documents:lengths=32/48/17", "documents:lengths=48/49"};
  bool saw_runs = false, saw_entries = false, saw_intervals = false;
  for (const std::string& spec : specs) {
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{97, 97}, {64, 80}, {7, 7}, {1, 1}}) {
      if (spec.rfind("documents", 0) == 0 && m != 97) continue;  // their lengths add up to 97
      SCOPED_TRACE(spec + " " + std::to_string(m) + " x " + std::to_string(n));
      const auto parsed = sparse_formats::parse_pattern_spec(spec);
      const auto csr = sparse_formats::make_pattern<int64_t>(parsed, m, n);
      const SparseMaskCounts counts(csr.view());
      (counts.uses_runs() ? saw_runs : saw_entries) = true;
      const auto intervals = sparse_formats::make_interval_pattern(parsed, m, n);
      std::optional<SparseMaskCounts> interval_counts;
      if (intervals) interval_counts.emplace(*intervals);
      saw_intervals = saw_intervals || intervals.has_value();
      for (int64_t block_keys = 1; block_keys <= n + 2; ++block_keys) {
        for (const int64_t run : {2, 3, 4, 5, 8, 16}) {
          const auto expected = walk_gathers(csr.view(), block_keys, run);
          EXPECT_GT(expected.loads, csr.nnz() > 0 ? 0 : -1);
          const auto counted = counts.gathers(block_keys, run);
          EXPECT_EQ(counted.loads, expected.loads) << block_keys << " keys, run " << run;
          EXPECT_EQ(counted.words, expected.words) << block_keys << " keys, run " << run;
          if (!interval_counts) continue;
          EXPECT_EQ(interval_counts->gathers(block_keys, run).loads, expected.loads) << block_keys << " keys, run " << run;
          EXPECT_EQ(interval_counts->gathers(block_keys, run).words, expected.words) << block_keys << " keys, run " << run;
        }
      }
    }
  }
  EXPECT_TRUE(saw_runs);
  EXPECT_TRUE(saw_entries);
  EXPECT_TRUE(saw_intervals);
}

TEST(SparseMaskCounts, EqualThePreparedMasksCountsForEveryBlockSize) {
  const std::vector<std::string> specs = {
      "causal", "sliding_window:w=7", "documents:lengths=30/0/40/27,causal=1", "bigbird:block=8,w=1,g=1,r=2,seed=3",
      "random:p=0.1,seed=4", "random:p=0.6,seed=5", "sliding_window:w=3 | random:p=0.02,seed=6",
      "bigbird:block=16,w=1,g=1,r=2,seed=3", "documents:lengths=32/48/17", "prefix_lm:p=40"};
  bool saw_runs = false, saw_entries = false;
  for (const std::string& spec : specs) {
    for (const auto& [m, n] : {std::pair<int64_t, int64_t>{97, 97}, {64, 80}, {1, 1}}) {
      if (spec.rfind("documents", 0) == 0 && m != 97) continue;  // their lengths add up to 97
      SCOPED_TRACE(spec + " " + std::to_string(m) + " x " + std::to_string(n));
      const auto csr = sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(spec), m, n);
      const SparseSmallCacheMask prepared(csr.view());
      const SparseMaskCounts counts(csr.view());
      (counts.uses_runs() ? saw_runs : saw_entries) = true;
      EXPECT_EQ(counts.nnz(), prepared.nnz());
      EXPECT_EQ(counts.nonempty_rows(), prepared.nonempty_rows());
      EXPECT_EQ(counts.nonempty_cols(), prepared.nonempty_cols());
      for (int64_t block = 1; block <= std::max(m, n) + 2; ++block) {
        EXPECT_EQ(counts.touched_keys(block), prepared.touched_keys(block)) << block;
        EXPECT_EQ(counts.touched_queries(block), prepared.touched_queries(block)) << block;
      }
    }
  }
  EXPECT_TRUE(saw_runs);
  EXPECT_TRUE(saw_entries);
}

TEST(SparseMaskCounts, TilesAndPredictionsEqualThePreparedMasks) {
  using namespace spattn::schedules;
  const auto csr = sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec("sliding_window:w=5"), 57, 57);
  const SparseSmallCacheMask prepared(csr.view());
  const SparseMaskCounts counts(csr.view());
  const HeadShape shape{57, 57, 16, 12};
  for (int64_t m : {sparse_small_cache_min_cache_words(spattn::Pass::backward), int64_t{100}, int64_t{1000}}) {
    for (spattn::Pass pass : {spattn::Pass::forward, spattn::Pass::backward}) {
      const auto tiles = sparse_small_cache_tiles(shape, counts, m, pass);
      const auto prepared_tiles = sparse_small_cache_tiles(shape, prepared, m, pass);
      EXPECT_EQ(tiles.scores, prepared_tiles.scores);
      EXPECT_EQ(tiles.dk, prepared_tiles.dk);
      EXPECT_EQ(tiles.dv, prepared_tiles.dv);
      const auto predicted = pass == spattn::Pass::forward ? predict_sparse_small_cache_forward(shape, counts, tiles)
                                                           : predict_sparse_small_cache_backward(shape, counts, tiles);
      const auto expected = pass == spattn::Pass::forward
                                ? predict_sparse_small_cache_forward(shape, prepared, prepared_tiles)
                                : predict_sparse_small_cache_backward(shape, prepared, prepared_tiles);
      EXPECT_EQ(predicted.total(), expected.total());
      EXPECT_GT(predicted.total().total(), 0);
    }
  }
}

// An int32 pattern (an element Mask's own arrays, Mask::csr32) counts what the same pattern as
// int64 counts, on the runs path and on the entries path, and prepares the same int64 copy.
TEST(SparseMaskCounts, Int32PatternsCountAndPrepareAsInt64Ones) {
  bool saw_runs = false, saw_entries = false;
  for (const std::string spec : {"sliding_window:w=3 | random:p=0.02,seed=6", "random:p=0.6,seed=5", "causal"}) {
    SCOPED_TRACE(spec);
    const auto parsed = sparse_formats::parse_pattern_spec(spec);
    const auto csr64 = sparse_formats::make_pattern<int64_t>(parsed, 97, 80);
    const auto csr32 = sparse_formats::make_pattern<int32_t>(parsed, 97, 80);
    const SparseMaskCounts counts64(csr64.view()), counts32(csr32.view());
    (counts32.uses_runs() ? saw_runs : saw_entries) = true;
    ASSERT_GT(counts32.nnz(), 0);
    EXPECT_EQ(counts32.uses_runs(), counts64.uses_runs());
    EXPECT_EQ(counts32.nnz(), counts64.nnz());
    EXPECT_EQ(counts32.nonempty_rows(), counts64.nonempty_rows());
    EXPECT_EQ(counts32.nonempty_cols(), counts64.nonempty_cols());
    for (int64_t block = 1; block <= 99; ++block) {
      EXPECT_EQ(counts32.touched_keys(block), counts64.touched_keys(block)) << block;
      EXPECT_EQ(counts32.touched_queries(block), counts64.touched_queries(block)) << block;
    }
    for (const int64_t run : {1, 2, 4, 16}) {
      EXPECT_EQ(counts32.entry_runs(run, false), counts64.entry_runs(run, false)) << run;
      EXPECT_EQ(counts32.entry_runs(run, true), counts64.entry_runs(run, true)) << run;
      for (const int64_t block_keys : {1, 3, 16, 80}) {
        EXPECT_EQ(counts32.gathers(block_keys, run).loads, counts64.gathers(block_keys, run).loads);
        EXPECT_EQ(counts32.gathers(block_keys, run).words, counts64.gathers(block_keys, run).words);
      }
    }
    const SparseSmallCacheMask prepared64(csr64.view()), prepared32(csr32.view());
    EXPECT_EQ(prepared32.row_ptr(), prepared64.row_ptr());
    EXPECT_EQ(prepared32.col_idx(), prepared64.col_idx());
    EXPECT_EQ(prepared32.col_ptr(), prepared64.col_ptr());
    EXPECT_EQ(prepared32.row_idx(), prepared64.row_idx());
    EXPECT_EQ(prepared32.csr_position(), prepared64.csr_position());
  }
  EXPECT_TRUE(saw_runs);
  EXPECT_TRUE(saw_entries);
}

// small_cache's prepared mask built from an interval mask's intervals holds the arrays it holds
// when built from the same mask's CSR (the copy, the transpose, the positions), and its counts.
TEST(SparseSmallCacheMask, FromIntervalsEqualsFromTheCsr) {
  for (const std::string spec : {"causal", "sliding_window:w=5", "documents:lengths=30/0/40/27,causal=1",
                                  "fixed:stride=16,c=3", "prefix_lm:p=9", "sliding_window:w=20 & documents:num_docs=3"}) {
    SCOPED_TRACE(spec);
    const auto parsed = sparse_formats::parse_pattern_spec(spec);
    const auto intervals = sparse_formats::make_interval_pattern(parsed, 97, 97);
    ASSERT_TRUE(intervals.has_value());
    const auto csr = sparse_formats::intervals_to_csr<int64_t>(*intervals);
    const SparseSmallCacheMask from_intervals(*intervals), from_csr(csr.view());
    ASSERT_GT(from_intervals.nnz(), 0);
    EXPECT_EQ(from_intervals.nnz(), from_csr.nnz());
    EXPECT_EQ(from_intervals.row_ptr(), from_csr.row_ptr());
    EXPECT_EQ(from_intervals.col_idx(), from_csr.col_idx());
    EXPECT_EQ(from_intervals.col_ptr(), from_csr.col_ptr());
    EXPECT_EQ(from_intervals.row_idx(), from_csr.row_idx());
    EXPECT_EQ(from_intervals.csr_position(), from_csr.csr_position());
    EXPECT_EQ(from_intervals.nonempty_rows(), from_csr.nonempty_rows());
    EXPECT_EQ(from_intervals.nonempty_cols(), from_csr.nonempty_cols());
  }
  const SparseSmallCacheMask empty(sparse_formats::IntervalPattern::empty(3, 4));
  EXPECT_EQ(empty.nnz(), 0);
  EXPECT_EQ(empty.row_ptr().size(), 4u);
}
