// Flash's tile lists as runs (schedules/flash/flash_mask.hpp): the lists built from intervals equal
// those built from the pairs, both passes, over the pattern library, odd sizes and tilings; a long
// causal mask is a few runs per tile row; the run line counts equal the sums they replace.
#include "schedules/common/dense_lines.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <sparse_formats/convert.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using spattn::Pass;
using spattn::schedules::build_flash_mask;
using spattn::schedules::FlashMask;
using spattn::schedules::FlashTiles;

namespace {

sparse_formats::IntervalPattern intervals_of(const std::string& spec, int64_t n_q, int64_t n_k) {
  auto intervals = sparse_formats::make_interval_pattern(sparse_formats::parse_pattern_spec(spec), n_q, n_k);
  if (!intervals) throw std::runtime_error(spec + " is not an interval mask");
  return *intervals;
}

}  // namespace

TEST(FlashMaskRuns, IntervalListsEqualThePairsLists) {
  const std::vector<std::string> specs = {"causal", "sliding_window:w=5", "sliding_window:w=9,causal=1",
                                          "global_window:w=3,g=4", "documents:num_docs=1,causal=1",
                                          "prefix_lm:p=6", "bigbird:block=8,w=1,g=1,r=2,seed=3",
                                          "random_blocks:block=5,p=0.5,seed=1", "full"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 7}, {97, 97}, {257, 257}, {33, 61}, {61, 33}};
  const std::vector<FlashTiles> tilings = {{1, 1, 1, 1}, {4, 2, 3, 5}, {32, 16, 16, 48}, {7, 13, 11, 1}, {64, 64, 64, 64}};
  int compared = 0;
  for (const std::string& spec : specs) {
    for (const auto& [n_q, n_k] : shapes) {
      const sparse_formats::IntervalPattern intervals = intervals_of(spec, n_q, n_k);
      const auto pairs = sparse_formats::intervals_to_csr<int64_t>(intervals);
      const sparse_formats::IntervalPattern transposed = sparse_formats::transpose(intervals);
      const auto transposed_pairs = sparse_formats::transpose(pairs.view());
      ASSERT_EQ(sparse_formats::intervals_to_csr<int64_t>(transposed).col_idx, transposed_pairs.col_idx) << spec;
      for (const FlashTiles& tiles : tilings) {
        for (Pass pass : {Pass::forward, Pass::backward}) {
          SCOPED_TRACE(spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k) + " tiles " +
                       std::to_string(tiles.block_q) + "," + std::to_string(tiles.block_k) + "," +
                       std::to_string(tiles.dkdv_block_q) + "," + std::to_string(tiles.dkdv_block_k));
          const FlashMask want = build_flash_mask(pairs.view(), n_q, n_k, tiles, pass);
          const FlashMask got = build_flash_mask(intervals, &transposed, n_q, n_k, tiles, pass);
          const FlashMask computed = build_flash_mask(intervals, nullptr, n_q, n_k, tiles, pass);
          EXPECT_TRUE(got.query_rows == want.query_rows);
          EXPECT_TRUE(got.key_cols == want.key_cols);
          EXPECT_TRUE(computed.key_cols == want.key_cols);
          EXPECT_EQ(got.nnz, want.nnz);
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 500);
}

TEST(FlashMaskRuns, RunsJoinTilesOfOneKind) {
  // Causal 8 x 8 at tiles of 2: query tile i visits key tiles 0 .. i - 1 full (one run) and tile
  // i partial (one run).
  const FlashMask mask = build_flash_mask(intervals_of("causal", 8, 8), nullptr, 8, 8, FlashTiles{2, 2, 2, 2},
                                          Pass::forward);
  const auto& lists = mask.query_rows;
  EXPECT_EQ(lists.run_ptr, (std::vector<int64_t>{0, 1, 3, 5, 7}));
  EXPECT_EQ(lists.runs, (std::vector<int64_t>{2 * 0 + 1, 1,                  // tile 0: partial
                                              2 * 0, 1, 2 * 1 + 1, 1,        // tile 1: full 0, partial 1
                                              2 * 0, 2, 2 * 2 + 1, 1,        // tile 2: full 0..1, partial 2
                                              2 * 0, 3, 2 * 3 + 1, 1}));     // tile 3: full 0..2, partial 3
  EXPECT_EQ(lists.num_stored(), 1 + 2 + 3 + 4);
  EXPECT_EQ(lists.num_partial(), 4);
}

TEST(FlashMaskRuns, ALongCausalMaskIsTwoRunsPerTileRow) {
  const int64_t n = int64_t{1} << 18, block = 64, tiles = n / block;
  const FlashMask mask = build_flash_mask(intervals_of("causal", n, n), nullptr, n, n,
                                          FlashTiles{block, block, block, block}, Pass::backward);
  EXPECT_EQ(mask.query_rows.num_runs(), 2 * tiles - 1);
  EXPECT_EQ(mask.key_cols.num_runs(), 2 * tiles - 1);
  EXPECT_EQ(mask.query_rows.num_stored(), tiles * (tiles + 1) / 2);
  EXPECT_EQ(mask.query_rows.num_partial(), tiles);
}

TEST(FlashMaskRuns, RunLinesEqualTheSumOverTheTiles) {
  for (int64_t line_words : {1, 8, 16, 32}) {
    for (int64_t width : {1, 3, 16, 17, 64}) {
      for (int64_t block : {1, 5, 16, 24, 33}) {
        for (int64_t rows : {1, 40, 97, 256}) {
          const int64_t num_tiles = (rows + block - 1) / block;
          for (int64_t first = 0; first < num_tiles; first += 3) {
            for (int64_t count = 1; first + count <= num_tiles; count += 2) {
              int64_t sum = 0;
              for (int64_t t = first; t < first + count; ++t) {
                sum += spattn::schedules::dense_rows_lines(t * block, std::min(block, rows - t * block), width, line_words);
              }
              ASSERT_EQ(spattn::schedules::dense_tile_run_lines(first, count, block, rows, width, line_words), sum)
                  << "L " << line_words << " width " << width << " block " << block << " rows " << rows << " first "
                  << first << " count " << count;
            }
          }
        }
      }
    }
  }
}
