// Conversions whose result is sized by a shape or block size rather than by the input's arrays
// (row offsets of a nearly empty result, a dense grid, partial-block bits): a size no machine holds
// is a FormatError naming the function, the array, the argument it is sized by, the size and the
// limit (physical memory), not a bare std::bad_alloc. The shapes here are tiny to build and would
// take petabytes to convert; ordinary conversions are covered by the other formats_* tests.
#include <gtest/gtest.h>

#include <cstdint>
#include <sparse_formats/convert.hpp>
#include <sparse_formats/patterns.hpp>
#include <string>
#include <vector>

#include "support/formats_fixtures.hpp"

namespace {

namespace sf = sparse_formats;
using formats_testing::throws_with;

constexpr int64_t kHuge = int64_t{1} << 50;  // 2^50 offsets of 8 bytes: 8 PiB
const std::string kLimit = "more than the limit of ";
const std::string kPhysical = "bytes (physical memory)";

// A 1 x kHuge int64 pattern with no entries: two row offsets.
sf::CsrPattern<int64_t> wide_empty() { return sf::CsrPattern<int64_t>(1, kHuge, {0, 0}, {}); }

TEST(FormatsAllocation, TransposeOfAWideEmptyPatternNamesNumCols) {
  EXPECT_TRUE(throws_with([] { sf::transpose(wide_empty().view()); },
                          {"transpose: row_ptr (num_cols + 1 = 1125899906842625 offsets) needs "
                           "1125899906842625 x 8 bytes = 9007199254741000 bytes",
                           kLimit, kPhysical}));
  const sf::CsrMatrix<int64_t, double> matrix{wide_empty(), {}};
  EXPECT_TRUE(
      throws_with([&] { sf::transpose(matrix.view()); },
                  {"transpose: row_ptr (num_cols + 1 = 1125899906842625 offsets)", kLimit}));
  sf::BsrPattern<int64_t> blocks;
  blocks.num_rows = 1;
  blocks.num_cols = kHuge;
  blocks.block_row_ptr = {0, 0};
  EXPECT_TRUE(
      throws_with([&] { sf::transpose(blocks.view()); },
                  {"transpose: row_ptr (num_block_cols + 1 = 1125899906842625 offsets)", kLimit}));
}

// Generators count before they allocate: a pattern past memory is refused with its nnz, having
// allocated only its row offsets.
TEST(FormatsAllocation, GeneratedPatternsNameTheirAttendedPairs) {
  EXPECT_TRUE(throws_with([] { sf::full_pattern<int64_t>(int64_t{1} << 10, kHuge); },
                          {"full: col_idx (nnz = 1152921504606846976 attended pairs)", kLimit, kPhysical}));
  EXPECT_TRUE(throws_with([] { sf::causal_pattern<int64_t>(int64_t{1} << 22, int64_t{1} << 22); },
                          {"causal: col_idx (nnz = 8796095119360 attended pairs) needs 8796095119360 x 8 bytes",
                           kLimit, kPhysical}));
  EXPECT_TRUE(throws_with([] { sf::causal_pattern<int64_t>(kHuge, kHuge); },
                          {"causal: row_ptr (seqlen_q + 1 offsets) needs 1125899906842625 x 8 bytes", kLimit}));
}

TEST(FormatsAllocation, DenseGridsNameTheirShape) {
  const sf::CsrMatrix<int64_t, double> matrix{wide_empty(), {}};
  EXPECT_TRUE(throws_with([&] { sf::csr_to_dense(matrix.view()); },
                          {"csr_to_dense: dense (num_rows * num_cols = 1 * 1125899906842624) needs "
                           "1125899906842624 x 8 bytes",
                           kLimit, kPhysical}));
  EXPECT_TRUE(throws_with([] { sf::csr_pattern_to_dense(wide_empty().view()); },
                          {"csr_pattern_to_dense: dense (num_rows * num_cols = 1 * "
                           "1125899906842624) needs 1125899906842624 x 1 bytes",
                           kLimit}));
}

TEST(FormatsAllocation, BuildersFromFewEntriesNameNumRows) {
  // One triplet in a kHuge-row matrix: the row counts and offsets are what the shape costs.
  EXPECT_TRUE(throws_with(
      [] {
        sf::coo_to_csr<int64_t>(kHuge, 4, {3}, {1}, std::vector<double>{1.0},
                                sf::DuplicatePolicy::sum);
      },
      {"coo_to_csr: row counts (num_rows + 1 = 1125899906842625)", kLimit}));
  EXPECT_TRUE(throws_with(
      [] { sf::coo_to_csr_pattern<int64_t>(kHuge, 4, {}, {}, sf::DuplicatePolicy::sum); },
      {"coo_to_csr_pattern: row counts (num_rows + 1 = 1125899906842625)", kLimit}));
  // No columns: the dense input is empty however many rows it has.
  EXPECT_TRUE(throws_with(
      [] { sf::dense_to_csr_pattern<int64_t>(static_cast<const float*>(nullptr), kHuge, 0); },
      {"dense_to_csr_pattern: row_ptr (num_rows + 1 = 1125899906842625 offsets)", kLimit}));
}

TEST(FormatsAllocation, HugeBlocksNameTheirBlockSizes) {
  // One entry of a 4 x 4 pattern in a 2^24 x 2^24 block: 2^42 words of partial bits.
  const sf::CsrPattern<int64_t> one(4, 4, {0, 1, 1, 1, 1}, {2});
  const int64_t block = int64_t{1} << 24;
  EXPECT_TRUE(throws_with([&] { sf::csr_to_bsr_mask(one.view(), block, block); },
                          {"csr_to_bsr_mask: partial_bits (num_partial * words_per_block = 1 * "
                           "4398046511104 words, block_m * block_n = 16777216 * 16777216) needs "
                           "4398046511104 x 8 bytes",
                           kLimit}));
  const sf::CsrMatrix<int64_t, float> valued{one, {1.0f}};
  EXPECT_TRUE(throws_with([&] { sf::csr_to_bsr(valued.view(), block, block); },
                          {"csr_to_bsr: values (num_blocks * block_m * block_n = 1 * 16777216 * "
                           "16777216) needs 281474976710656 x 4 bytes",
                           kLimit}));
}

TEST(FormatsAllocation, BlockStructuresNameTheirElementRows) {
  // One block row of kHuge element rows and no stored blocks.
  sf::BsrMask<int64_t> mask;
  mask.blocks.num_rows = kHuge;
  mask.blocks.num_cols = 1;
  mask.blocks.block_m = kHuge;
  mask.blocks.block_row_ptr = {0, 0};
  EXPECT_TRUE(
      throws_with([&] { sf::bsr_mask_to_csr(mask); },
                  {"bsr_mask_to_csr: row_ptr (num_rows + 1 = 1125899906842625 offsets)", kLimit}));
  EXPECT_TRUE(
      throws_with([&] { sf::mask_stats(mask); },
                  {"mask_stats: row_length (rows of block row 0 = 1125899906842624)", kLimit}));
  sf::BsrMatrix<int64_t, double> matrix;
  matrix.blocks = mask.blocks;
  EXPECT_TRUE(
      throws_with([&] { sf::bsr_to_csr(matrix); },
                  {"bsr_to_csr: row_ptr (num_rows + 1 = 1125899906842625 offsets)", kLimit}));
}

}  // namespace
