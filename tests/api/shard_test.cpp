// Shards (include/spattn/shard.hpp): select_mask against hand-checked cases and a dense copy,
// merge_attention_partials against hand values and its exactness rules, and the property context
// parallelism relies on: attention over key parts, merged, is attention over all keys, and the
// backward over each part with the merged o and lse gives that part's dk, dv and a partial dq.
#include <spattn/attention.hpp>
#include <spattn/shard.hpp>

#include "support/api_problem.hpp"
#include "support/compare.hpp"
#include "support/index_ranges.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using spattn::IndexRange;
using spattn::Mask;
using spattn::select_mask;
using spattn::TensorView;
using spattn::testing::contains;
using spattn::testing::message_of;

namespace {

using spattn::testing::positions_of;
using spattn::testing::Ranges;

// The 6 x 6 mask of the hand-checked cases:
//   row 0: 0            row 3: 1 3 5
//   row 1: 0 1          row 4: 0 2 4 5
//   row 2: (none)       row 5: 0 1 2 3 4 5
Mask six_by_six() {
  sparse_formats::CsrPattern<int64_t> pattern(6, 6, {0, 1, 3, 3, 6, 10, 16},
                                              {0, 0, 1, 1, 3, 5, 0, 2, 4, 5, 0, 1, 2, 3, 4, 5});
  return Mask::from_csr(std::move(pattern), "six_by_six");
}

std::vector<int64_t> row_ptr_of(const Mask& mask) {
  const auto csr = mask.csr();
  return {csr.row_ptr, csr.row_ptr + csr.num_rows + 1};
}

std::vector<int64_t> col_idx_of(const Mask& mask) {
  const auto csr = mask.csr();
  return {csr.col_idx, csr.col_idx + csr.nnz()};
}

// The mask as a row-major seqlen_q x seqlen_k array of 0 / 1.
std::vector<char> dense_of(const Mask& mask) {
  const auto csr = mask.csr();
  std::vector<char> dense(static_cast<size_t>(mask.seqlen_q() * mask.seqlen_k()), 0);
  for (int64_t i = 0; i < csr.num_rows; ++i) {
    for (int64_t e = csr.row_begin(i); e < csr.row_end(i); ++e) dense[static_cast<size_t>(i * mask.seqlen_k() + csr.col_idx[e])] = 1;
  }
  return dense;
}

// Disjoint pieces of [0, n) in random order, some of [0, n) left out, with empty ranges mixed in.
Ranges random_ranges(int64_t n, std::mt19937& rng) {
  std::vector<int64_t> cuts{0, n};
  for (int c = static_cast<int>(rng() % 5); c > 0; --c) cuts.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1)));
  std::sort(cuts.begin(), cuts.end());
  Ranges ranges;
  for (size_t i = 1; i < cuts.size(); ++i) {
    if (rng() % 4 != 0) ranges.push_back({cuts[i - 1], cuts[i]});
  }
  const int64_t at = static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1));
  ranges.push_back({at, at});
  if (rng() % 2 == 0) std::shuffle(ranges.begin(), ranges.end(), rng);
  return ranges;
}

}  // namespace

TEST(SelectMask, HandCheckedCasesOnASixBySixMask) {
  const Mask mask = six_by_six();
  // Rows 1..3, cols {0, 1, 3, 4, 5}: global col 3 is local 2.
  const Mask in_order = select_mask(mask, {{1, 4}}, {{0, 2}, {3, 6}});
  EXPECT_EQ(in_order.seqlen_q(), 3);
  EXPECT_EQ(in_order.seqlen_k(), 5);
  EXPECT_EQ(row_ptr_of(in_order), (std::vector<int64_t>{0, 2, 2, 5}));
  EXPECT_EQ(col_idx_of(in_order), (std::vector<int64_t>{0, 1, 1, 2, 4}));

  // Rows 3, 4, 0, 1 and cols 3, 4, 5, 0, 1: the output rows still ascend.
  const Mask reversed = select_mask(mask, {{3, 5}, {0, 2}}, {{3, 6}, {0, 2}});
  EXPECT_EQ(reversed.seqlen_q(), 4);
  EXPECT_EQ(reversed.seqlen_k(), 5);
  EXPECT_EQ(row_ptr_of(reversed), (std::vector<int64_t>{0, 3, 6, 7, 9}));
  EXPECT_EQ(col_idx_of(reversed), (std::vector<int64_t>{0, 2, 4, 1, 2, 3, 3, 3, 4}));

  // Empty ranges anywhere, even inside a selected range: row 5, cols 4 and 5, which all attend.
  const Mask with_empty = select_mask(mask, {{2, 2}, {5, 6}, {0, 0}, {5, 5}}, {{6, 6}, {4, 6}, {1, 1}, {5, 5}});
  EXPECT_EQ(with_empty.seqlen_q(), 1);
  EXPECT_EQ(with_empty.seqlen_k(), 2);
  EXPECT_EQ(col_idx_of(with_empty), (std::vector<int64_t>{0, 1}));
  EXPECT_TRUE(with_empty.is_full());

  // Empty results: no rows, no cols, or rows that attend nothing in the cols.
  const Mask no_rows = select_mask(mask, {}, {{0, 6}});
  EXPECT_EQ(no_rows.seqlen_q(), 0);
  EXPECT_EQ(no_rows.seqlen_k(), 6);
  EXPECT_EQ(no_rows.nnz(), 0);
  const Mask no_cols = select_mask(mask, {{0, 3}}, {});
  EXPECT_EQ(no_cols.seqlen_q(), 3);
  EXPECT_EQ(no_cols.seqlen_k(), 0);
  const Mask nothing_attends = select_mask(mask, {{0, 3}}, {{2, 6}});
  EXPECT_EQ(nothing_attends.seqlen_q(), 3);
  EXPECT_EQ(nothing_attends.seqlen_k(), 4);
  EXPECT_EQ(nothing_attends.nnz(), 0);
  EXPECT_FALSE(nothing_attends.is_full());
}

TEST(SelectMask, AFullMaskStaysFull) {
  const Mask selected = select_mask(Mask::full(6, 7), {{1, 3}}, {{2, 5}, {0, 1}});
  EXPECT_TRUE(selected.is_full());
  EXPECT_EQ(selected.seqlen_q(), 2);
  EXPECT_EQ(selected.seqlen_k(), 4);
  EXPECT_EQ(selected.nnz(), 8);
  // No CSR is needed for a full mask, even one too large to hold as CSR.
  const int64_t huge = int64_t{1} << 30;  // 2^60 pairs: no CSR could hold them
  EXPECT_TRUE(select_mask(Mask::full(huge, huge), {{0, huge}}, {{5, huge}}).is_full());
}

TEST(SelectMask, BadRangesAreRefusedByNameAndValue) {
  const Mask mask = six_by_six();
  auto message = [&](const Ranges& rows, const Ranges& cols) {
    return message_of<spattn::InvalidArgument>([&] { select_mask(mask, rows, cols); });
  };
  EXPECT_TRUE(contains(message({{0, 1}, {3, 7}}, {}), "select_mask: rows[1] = [3, 7) must satisfy 0 <= begin <= end <= seqlen_q = 6"));
  EXPECT_TRUE(contains(message({}, {{-1, 2}}), "select_mask: cols[0] = [-1, 2) must satisfy 0 <= begin <= end <= seqlen_k = 6"));
  EXPECT_TRUE(contains(message({{4, 2}}, {}), "select_mask: rows[0] = [4, 2)"));
  EXPECT_TRUE(contains(message({}, {{0, 3}, {5, 6}, {2, 4}}), "select_mask: cols[0] = [0, 3) and cols[2] = [2, 4) overlap"));
  EXPECT_TRUE(contains(message({{1, 2}, {1, 2}}, {}), "select_mask: rows[0] = [1, 2) and rows[1] = [1, 2) overlap"));
  // A full mask checks its ranges too.
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([] { select_mask(Mask::full(4, 4), {}, {{2, 5}}); }),
                       "cols[0] = [2, 5)"));
  // Lengths whose sum passes int64 (possible only with overlapping ranges) are refused before they are added.
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] { select_mask(Mask::full(1, max), {}, {{0, max}, {1, max}}); }),
                       "select_mask: the lengths of cols up to cols[1] = [1, 9223372036854775807) sum past int64"));
}

TEST(SelectMask, EqualsTheDenseSelectionOnThePatternLibrary) {
  struct Case {
    const char* spec;
    int64_t seqlen_q, seqlen_k;
  };
  std::mt19937 rng(17);
  for (const Case& c : {Case{"causal", 53, 53}, Case{"sliding_window:w=4", 53, 53}, Case{"random:p=0.15,seed=9", 37, 53},
                        Case{"documents:lengths=20/33,causal=1", 53, 53}, Case{"full", 29, 31}}) {
    const Mask mask = Mask::from_spec(c.spec, c.seqlen_q, c.seqlen_k);
    const std::vector<char> dense = dense_of(mask);
    for (int trial = 0; trial < 40; ++trial) {
      const Ranges rows = random_ranges(c.seqlen_q, rng), cols = random_ranges(c.seqlen_k, rng);
      const std::vector<int64_t> row_at = positions_of(rows), col_at = positions_of(cols);
      const Mask selected = select_mask(mask, rows, cols);
      SCOPED_TRACE(std::string(c.spec) + " trial " + std::to_string(trial));
      ASSERT_EQ(selected.seqlen_q(), static_cast<int64_t>(row_at.size()));
      ASSERT_EQ(selected.seqlen_k(), static_cast<int64_t>(col_at.size()));
      EXPECT_EQ(selected.is_full(), mask.is_full() || selected.nnz() == selected.seqlen_q() * selected.seqlen_k());
      const std::vector<char> got = dense_of(selected);
      int64_t mismatches = 0, attended = 0;
      for (size_t i = 0; i < row_at.size(); ++i) {
        for (size_t j = 0; j < col_at.size(); ++j) {
          const char expected = dense[static_cast<size_t>(row_at[i] * c.seqlen_k + col_at[j])];
          mismatches += got[i * col_at.size() + j] != expected;
          attended += expected;
        }
      }
      EXPECT_EQ(mismatches, 0);
      EXPECT_EQ(selected.nnz(), attended);
    }
  }
}

TEST(AttendedKeys, HandCheckedCasesAndTheDenseUnionOfRows) {
  const Mask mask = six_by_six();
  EXPECT_EQ(attended_keys(mask, {{0, 2}}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(attended_keys(mask, {{3, 5}, {2, 3}}), (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(attended_keys(mask, {{3, 4}, {0, 1}}), (std::vector<int64_t>{0, 1, 3, 5}));
  EXPECT_TRUE(attended_keys(mask, {{2, 3}}).empty());  // row 2 attends nothing
  EXPECT_TRUE(attended_keys(mask, {}).empty());
  EXPECT_EQ(attended_keys(Mask::full(3, 4), {{1, 2}}), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(attended_keys(Mask::full(3, 4), {{1, 1}}).empty());
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] { attended_keys(mask, {{0, 7}}); }),
                       "attended_keys: rows[0] = [0, 7) must satisfy 0 <= begin <= end <= seqlen_q = 6"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] { attended_keys(mask, {{0, 3}, {2, 4}}); }),
                       "attended_keys: rows[0] = [0, 3) and rows[1] = [2, 4) overlap"));
  std::mt19937 rng(5);
  for (const char* spec : {"causal", "sliding_window:w=3", "random:p=0.1,seed=3", "documents:lengths=20/33"}) {
    const Mask pattern = Mask::from_spec(spec, 53, 53);
    const std::vector<char> dense = dense_of(pattern);
    for (int trial = 0; trial < 20; ++trial) {
      const Ranges rows = random_ranges(53, rng);
      std::vector<int64_t> expected;
      for (int64_t key = 0; key < 53; ++key) {
        bool any = false;
        for (const int64_t row : positions_of(rows)) any = any || dense[static_cast<size_t>(row * 53 + key)];
        if (any) expected.push_back(key);
      }
      EXPECT_EQ(attended_keys(pattern, rows), expected) << spec << " trial " << trial;
    }
  }
}

namespace {

// A (1, 1, rows, dim) row-major tensor.
TensorView<float> rows_view(std::vector<float>& x, int64_t rows) {
  return TensorView<float>::contiguous(x.data(), 1, 1, rows, static_cast<int64_t>(x.size()) / rows);
}
TensorView<const float> rows_input(const std::vector<float>& x, int64_t rows) {
  return TensorView<const float>::contiguous(x.data(), 1, 1, rows, static_cast<int64_t>(x.size()) / rows);
}

const float kMinusInf = -std::numeric_limits<float>::infinity();

}  // namespace

TEST(MergeAttentionPartials, HandComputedRows) {
  // Row 0: weights e^0 : e^{log 3} = 1 : 3, so o = (1 (1, 2) + 3 (5, -2)) / 4 = (4, -1), lse = log 4.
  // Row 1: equal lse, so o is the mean (1, 0) and lse = 2 + log 2.
  std::vector<float> o{1.0f, 2.0f, 0.5f, 1.0f}, lse{0.0f, 2.0f};
  const std::vector<float> o_part{5.0f, -2.0f, 1.5f, -1.0f}, lse_part{std::log(3.0f), 2.0f};
  spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse, 2), rows_input(o_part, 2), rows_input(lse_part, 2));
  const std::vector<float> expected_o{4.0f, -1.0f, 1.0f, 0.0f};
  for (size_t i = 0; i < o.size(); ++i) EXPECT_NEAR(o[i], expected_o[i], 1e-6) << i;
  EXPECT_NEAR(lse[0], std::log(4.0), 1e-6);
  EXPECT_NEAR(lse[1], 2.0 + std::log(2.0), 1e-6);
}

TEST(MergeAttentionPartials, EmptySidesAreExact) {
  // Row 0: both empty. Row 1: the part is empty. Row 2: o is empty (its o holds leftovers).
  std::vector<float> o{7.0f, 8.0f, 0.1f, -0.0f, 3.0f, 3.0f}, lse{kMinusInf, 1.0f / 3.0f, kMinusInf};
  const std::vector<float> o_part{-1.0f, 2.0f, 9.0f, 9.0f, 0.3f, -0.0f}, lse_part{kMinusInf, kMinusInf, 0.7f};
  spattn::merge_attention_partials(rows_view(o, 3), rows_view(lse, 3), rows_input(o_part, 3), rows_input(lse_part, 3));
  const std::vector<float> expected_o{0.0f, 0.0f, 0.1f, -0.0f, 0.3f, -0.0f};
  const std::vector<float> expected_lse{kMinusInf, 1.0f / 3.0f, 0.7f};
  EXPECT_TRUE(spattn::testing::same_bits(o, expected_o));
  EXPECT_TRUE(spattn::testing::same_bits(lse, expected_lse));
}

TEST(MergeAttentionPartials, RefusalsNameTheArgumentAndWriteNothing) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<float> o, lse, o_part, lse_part;
    int64_t part_rows;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{1, 2, 3, 4}, {0, 0}, {1, 2, 3, 4, 5, 6}, {0, 0, 0}, 3,
       "merge_attention_partials: o_part has extent 3 in dimension 2, o has 2"},
      {{1, 2, 3, 4}, {inf, 0}, {1, 2, 3, 4}, {0, 0}, 2, "merge_attention_partials: lse[0, 0, 0, 0] = inf is not finite"},
      {{1, 2, 3, 4}, {0, 0}, {1, 2, 3, 4}, {0, nan}, 2, "merge_attention_partials: lse_part[0, 0, 1, 0] = nan"},
      {{1, 2, nan, 4}, {0, 0}, {1, 2, 3, 4}, {0, 0}, 2, "merge_attention_partials: o[0, 0, 1, 0] = nan"},
      {{1, 2, 3, 4}, {0, 0}, {1, 2, 3, -inf}, {0, 0}, 2, "merge_attention_partials: o_part[0, 0, 1, 1] = -inf"},
  };
  for (const Case& c : cases) {
    std::vector<float> o = c.o, lse = c.lse;
    const std::string text = message_of<spattn::InvalidArgument>([&] {
      spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse, 2), rows_input(c.o_part, c.part_rows),
                                       rows_input(c.lse_part, c.part_rows));
    });
    EXPECT_TRUE(contains(text, c.message));
    EXPECT_TRUE(spattn::testing::same_bits(o, c.o)) << c.message;
    EXPECT_TRUE(spattn::testing::same_bits(lse, c.lse)) << c.message;
  }
  // An lse of the wrong last extent, and outputs that share memory with the part.
  std::vector<float> o{1, 2, 3, 4}, lse{0, 0, 0, 0};
  const std::vector<float> before = o;
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse, 2), rows_input(o, 2), rows_input(lse, 2));
                       }),
                       "merge_attention_partials: lse must have last extent 1, has 2"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse, 4), rows_input(o, 2), rows_input(lse, 4));
                       }),
                       "merge_attention_partials: lse has extent 4 in dimension 2, o has 2"));
  std::vector<float> lse2{0, 0}, lse_part{0, 0};
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse2, 2), rows_input(o, 2), rows_input(lse_part, 2));
                       }),
                       "merge_attention_partials: o shares memory with o_part"));
  EXPECT_TRUE(contains(message_of<spattn::InvalidArgument>([&] {
                         spattn::merge_attention_partials(rows_view(o, 2), rows_view(lse2, 2), rows_input(before, 2), rows_input(lse2, 2));
                       }),
                       "merge_attention_partials: lse shares memory with lse_part"));
  EXPECT_TRUE(spattn::testing::same_bits(o, before));
}
