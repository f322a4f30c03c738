// The forms a Mask lives in (spattn/mask.hpp): which form each spec takes, what it holds, and that
// every algorithm, plan, count and selection over the interval form equals the same mask held as
// pairs, bit for bit.
#include <spattn/attention.hpp>
#include <spattn/mask.hpp>
#include <spattn/shard.hpp>

#include "support/api_problem.hpp"

#include <sparse_formats/convert.hpp>
#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::IndexRange;
using spattn::Mask;
using spattn::MaskForm;

namespace {

// The same mask held pair by pair (the element form), built through the CSR generators.
Mask as_pairs(const std::string& spec, int64_t n_q, int64_t n_k) {
  return Mask::from_csr(sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(spec), n_q, n_k),
                        spec);
}

// The same mask held as blocks of block_m x block_n (full, or partial with the pairs' bits).
Mask as_blocks(const std::string& spec, int64_t n_q, int64_t n_k, int64_t block_m, int64_t block_n) {
  const auto pairs = sparse_formats::make_pattern<int32_t>(sparse_formats::parse_pattern_spec(spec), n_q, n_k);
  return Mask::from_blocks(sparse_formats::csr_to_bsr_mask(pairs.view(), block_m, block_n), spec);
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
    ASSERT_TRUE(same) << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

// Forward and backward over `compact` and over `pairs` (the same mask as element CSR): the same
// plans, the same counted words and lines, and the same outputs and gradients, bit for bit.
void expect_runs_as_the_pairs(const Mask& compact, const Mask& pairs, Algorithm algorithm, int64_t cache_words) {
  const int64_t n_q = pairs.seqlen_q(), n_k = pairs.seqlen_k();
  spattn::io::Ledger ledger_compact, ledger_pairs;
  AttentionOptions options;
  options.algorithm = algorithm;
  options.cache_words = cache_words;
  spattn::testing::ApiProblem a(1, 2, 2, n_q, n_k, 8), b(1, 2, 2, n_q, n_k, 8);
  options.ledger = &ledger_compact;
  const auto plans_a = a.run({compact}, options);
  options.ledger = &ledger_pairs;
  const auto plans_b = b.run({pairs}, options);
  EXPECT_EQ(plans_a.first.to_string(), plans_b.first.to_string());  // (== also asks for the same Mask)
  EXPECT_EQ(plans_a.second.to_string(), plans_b.second.to_string());
  EXPECT_EQ(ledger_compact.report(), ledger_pairs.report());
  expect_same_bits(a.o, b.o, "O");
  expect_same_bits(a.lse, b.lse, "LSE");
  expect_same_bits(a.dq, b.dq, "dQ");
  expect_same_bits(a.dk, b.dk, "dK");
  expect_same_bits(a.dv, b.dv, "dV");
}

}  // namespace

TEST(MaskForms, EachSpecTakesTheFormThatDescribesItExactly) {
  EXPECT_EQ(Mask::from_spec("full", 64, 64).form(), MaskForm::full);
  EXPECT_EQ(Mask::from_spec("causal", 64, 64).form(), MaskForm::intervals);
  EXPECT_EQ(Mask::from_spec("documents:num_docs=4,causal=1", 64, 64).form(), MaskForm::intervals);
  EXPECT_EQ(Mask::from_spec("bigbird:block=8,seed=1", 64, 64).form(), MaskForm::blocks);
  EXPECT_EQ(Mask::from_spec("random_blocks:block_m=8,block_n=4,p=0.3,seed=1", 64, 64).form(), MaskForm::blocks);
  EXPECT_EQ(Mask::from_spec("random_blocks:block_m=8,block_n=4,p=0.3,seed=1", 64, 64).blocks()->blocks.block_n, 4);
  EXPECT_EQ(Mask::from_spec("bigbird:block=8,seed=1 & causal", 64, 64).form(), MaskForm::intervals);
  EXPECT_EQ(Mask::from_spec("random:p=0.1,seed=1", 64, 64).form(), MaskForm::elements);
  EXPECT_EQ(Mask::from_spec("sliding_window:w=100", 64, 64).form(), MaskForm::full);  // covers every pair
  EXPECT_STREQ(spattn::form_name(MaskForm::intervals), "intervals");
  const Mask causal = Mask::from_spec("causal", 64, 64);
  ASSERT_NE(causal.intervals(), nullptr);
  EXPECT_EQ(causal.nnz(), 64 * 65 / 2);
  EXPECT_EQ(causal.memory_bytes(), 8 * (65 + 2 * 64));
  EXPECT_EQ(Mask::from_spec("random:p=0.1,seed=1", 64, 64).intervals(), nullptr);
}

TEST(MaskForms, ACausalMaskOfAMillionTokensHoldsItsRowsNotItsPairs) {
  const int64_t n = int64_t{1} << 20;
  const Mask causal = Mask::from_spec("causal", n, n);
  EXPECT_EQ(causal.form(), MaskForm::intervals);
  EXPECT_EQ(causal.nnz(), n * (n + 1) / 2);
  EXPECT_LE(causal.memory_bytes(), 32 * n);
  const Mask window = Mask::from_spec("sliding_window:w=256", n, n);
  EXPECT_LE(window.memory_bytes(), 32 * n);
}

TEST(MaskForms, TheElementStructureOfAnIntervalMaskIsBuiltOnRequest) {
  const Mask window = Mask::from_spec("sliding_window:w=2", 9, 9);
  const int64_t compact = window.memory_bytes();
  const auto csr = window.csr();
  const auto pairs = sparse_formats::sliding_window_pattern<int64_t>(9, 9, 2);
  EXPECT_EQ(std::vector<int64_t>(csr.row_ptr, csr.row_ptr + 10), pairs.row_ptr);
  EXPECT_EQ(std::vector<int64_t>(csr.col_idx, csr.col_idx + csr.nnz()), pairs.col_idx);
  EXPECT_EQ(window.memory_bytes(), compact + 8 * (10 + pairs.nnz()));
}

// An element mask holds int32 indices where they fit: 4 bytes a pair and a row, whichever way it
// was built; csr() builds the int64 structure on request, beside them. The other forms hold none.
TEST(MaskForms, AnElementMaskHoldsInt32IndicesWhereTheyFit) {
  const std::string spec = "random:p=0.1,seed=1";
  const auto pairs = sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(spec), 97, 257);
  ASSERT_GT(pairs.nnz(), 0);
  const auto pairs32 = sparse_formats::convert_index<int32_t>(pairs.view());
  for (const Mask& mask : {Mask::from_spec(spec, 97, 257), Mask::from_csr(pairs.view()), Mask::from_csr(pairs32.view()),
                           Mask::from_csr(sparse_formats::CsrPattern<int64_t>(pairs))}) {
    ASSERT_EQ(mask.form(), MaskForm::elements);
    const auto csr32 = mask.csr32();
    ASSERT_TRUE(csr32.has_value());
    EXPECT_EQ(std::vector<int32_t>(csr32->row_ptr, csr32->row_ptr + 98), pairs32.row_ptr);
    EXPECT_EQ(std::vector<int32_t>(csr32->col_idx, csr32->col_idx + csr32->nnz()), pairs32.col_idx);
    EXPECT_EQ(mask.memory_bytes(), 4 * (98 + pairs.nnz()));
    const auto csr = mask.csr();
    EXPECT_EQ(std::vector<int64_t>(csr.row_ptr, csr.row_ptr + 98), pairs.row_ptr);
    EXPECT_EQ(std::vector<int64_t>(csr.col_idx, csr.col_idx + csr.nnz()), pairs.col_idx);
    EXPECT_EQ(mask.memory_bytes(), 4 * (98 + pairs.nnz()) + 8 * (98 + pairs.nnz()));
  }
  EXPECT_FALSE(Mask::from_spec("causal", 9, 9).csr32().has_value());
  EXPECT_FALSE(Mask::from_spec("bigbird:block=4,w=1,g=1,r=1,seed=2", 16, 16).csr32().has_value());
  EXPECT_FALSE(Mask::full(9, 9).csr32().has_value());
  EXPECT_FALSE(Mask::from_csr(sparse_formats::full_pattern<int64_t>(9, 9)).csr32().has_value());  // full form
}

TEST(MaskForms, BadIntervalsAreRefusedNamingTheArgument) {
  sparse_formats::IntervalPattern overlapping(1, 8, {0, 2}, {0, 3}, {4, 6});
  try {
    Mask::from_intervals(std::move(overlapping), "my mask");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("my mask: row 0, interval 1 = [3, 6) starts before"), std::string::npos)
        << e.what();
  }
}

// Every algorithm over the interval form: the same plan, the same counted words and lines, and the
// same outputs and gradients, bit for bit, as over the pairs.
TEST(MaskForms, EveryAlgorithmRunsTheIntervalFormAsThePairs) {
  const std::vector<std::string> specs = {"causal", "sliding_window:w=5", "documents:num_docs=1,causal=1",
                                          "global_window:w=3,g=2", "prefix_lm:p=6",
                                          "bigbird:block=8,w=1,g=1,r=2,seed=3", "sliding_window:w=6 & causal"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 7}, {97, 97}, {33, 61}, {61, 33}};
  std::vector<std::string> all = specs;
  all.push_back("documents:lengths=20/50/27,causal=1");  // 97 only
  for (const std::string& spec : all) {
    for (const auto& [n_q, n_k] : shapes) {
      if (spec.find("lengths=") != std::string::npos && (n_q != 97 || n_k != 97)) continue;
      const Mask compact = Mask::from_spec(spec, n_q, n_k);
      const Mask pairs = as_pairs(spec, n_q, n_k);
      ASSERT_EQ(compact.nnz(), pairs.nnz());
      ASSERT_EQ(compact.is_full(), pairs.is_full());
      for (Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache}) {
        for (int64_t m : {int64_t{120}, int64_t{4096}}) {
          SCOPED_TRACE(spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k) + " " +
                       spattn::algorithm_name(algorithm) + " M " + std::to_string(m));
          expect_runs_as_the_pairs(compact, pairs, algorithm, m);
        }
      }
      spattn::testing::ApiProblem check(1, 2, 2, n_q, n_k, 8);
      check.run({compact}, AttentionOptions{});
      check.expect_matches_reference({compact});
    }
  }
}

TEST(MaskForms, SelectionsOfTheIntervalFormEqualThoseOfThePairs) {
  const std::vector<std::string> specs = {"causal", "sliding_window:w=4", "documents:num_docs=5",
                                          "global_window:w=2,g=3"};
  const std::vector<std::vector<IndexRange>> row_sets = {{{0, 40}}, {{10, 20}, {30, 35}}, {{39, 40}, {0, 3}}, {}};
  const std::vector<std::vector<IndexRange>> col_sets = {
      {{0, 40}}, {{5, 25}}, {{20, 30}, {0, 10}}, {{0, 8}, {8, 16}, {30, 40}}, {{12, 12}, {3, 5}}};
  for (const std::string& spec : specs) {
    const Mask compact = Mask::from_spec(spec, 40, 40);
    const Mask pairs = as_pairs(spec, 40, 40);
    ASSERT_EQ(compact.form(), MaskForm::intervals);
    for (const auto& rows : row_sets) {
      EXPECT_EQ(spattn::attended_keys(compact, rows), spattn::attended_keys(pairs, rows)) << spec;
      for (const auto& cols : col_sets) {
        const Mask a = spattn::select_mask(compact, rows, cols);
        const Mask b = spattn::select_mask(pairs, rows, cols);
        ASSERT_EQ(a.seqlen_q(), b.seqlen_q());
        ASSERT_EQ(a.nnz(), b.nnz()) << spec;
        const auto ca = a.csr(), cb = b.csr();
        EXPECT_EQ(std::vector<int64_t>(ca.row_ptr, ca.row_ptr + ca.num_rows + 1),
                  std::vector<int64_t>(cb.row_ptr, cb.row_ptr + cb.num_rows + 1))
            << spec;
        EXPECT_EQ(std::vector<int64_t>(ca.col_idx, ca.col_idx + ca.nnz()),
                  std::vector<int64_t>(cb.col_idx, cb.col_idx + cb.nnz()))
            << spec;
        if (!a.is_full() && a.nnz() > 0) {
          EXPECT_EQ(a.form(), MaskForm::intervals) << spec;
        }
      }
    }
  }
}

TEST(MaskForms, ABlockMaskHoldsItsBlocksAndBuildsItsRowsOnce) {
  const Mask mask = as_blocks("bigbird:block=16,w=1,g=1,r=2,seed=1", 256, 256, 16, 16);
  ASSERT_EQ(mask.form(), MaskForm::blocks);
  ASSERT_NE(mask.blocks(), nullptr);
  EXPECT_EQ(mask.intervals(), nullptr);
  EXPECT_STREQ(spattn::form_name(MaskForm::blocks), "blocks");
  const int64_t stored = mask.blocks()->blocks.num_blocks();
  EXPECT_EQ(mask.blocks()->num_partial(), 0);
  // 4 bytes a row pointer, 4 + 1 + 8 a stored block (column, kind, partial slot).
  EXPECT_EQ(mask.memory_bytes(), 4 * 17 + 13 * stored);
  EXPECT_EQ(mask.nnz(), Mask::from_spec("bigbird:block=16,w=1,g=1,r=2,seed=1", 256, 256).nnz());
  const sparse_formats::IntervalPattern* rows = mask.row_intervals();
  ASSERT_NE(rows, nullptr);
  EXPECT_EQ(rows, mask.row_intervals());  // built once
  EXPECT_EQ(mask.memory_bytes(), 4 * 17 + 13 * stored + rows->memory_bytes());
  EXPECT_EQ(Mask::from_spec("random:p=0.1,seed=1", 64, 64).row_intervals(), nullptr);
}

TEST(MaskForms, ABlockMaskBeyondInt32IsRefusedBeforeAnythingIsBuilt) {
  // One full block of 2^40 x 1 pairs: the block form's int32 indices cannot name its rows.
  sparse_formats::BsrMask<int32_t> huge;
  huge.blocks.num_rows = int64_t{1} << 40;
  huge.blocks.num_cols = 1;
  huge.blocks.block_m = int64_t{1} << 40;
  huge.blocks.block_n = 1;
  huge.blocks.block_row_ptr = {0, 1};
  huge.blocks.block_col_idx = {0};
  huge.kind = {sparse_formats::BlockKind::full};
  huge.partial_slot = {-1};
  try {
    Mask::from_blocks(std::move(huge), "huge");
    FAIL() << "expected a refusal";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("huge: num_rows = 1099511627776 does not fit the int32 index type"),
              std::string::npos)
        << e.what();
  }
}

TEST(MaskForms, BadBlocksAreRefusedNamingTheArgument) {
  auto blocks = sparse_formats::csr_to_bsr_mask(
      sparse_formats::make_pattern<int32_t>(sparse_formats::parse_pattern_spec("causal"), 8, 8).view(), 4, 4);
  auto unsorted = blocks;
  unsorted.blocks.block_col_idx = {0, 1, 0};  // block row 1 lists block 1 before block 0
  try {
    Mask::from_blocks(std::move(unsorted), "selection");
    FAIL() << "unsorted block columns were accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("selection"), std::string::npos) << e.what();
  }
  auto out_of_range = blocks;
  out_of_range.blocks.block_col_idx.back() = 2;
  EXPECT_THROW(Mask::from_blocks(std::move(out_of_range), "selection"), std::exception);
  auto all_set = blocks;
  all_set.partial_bits[0] = ~uint64_t{0} >> 48;  // every pair of a 4 x 4 partial block
  EXPECT_THROW(Mask::from_blocks(std::move(all_set), "selection"), std::exception);
}

// The block form, with full and partial blocks (element patterns too), runs every algorithm as the
// pairs, bit for bit, and selects as the pairs.
TEST(MaskForms, EveryAlgorithmRunsTheBlockFormAsThePairs) {
  const std::vector<std::string> specs = {"causal", "random:p=0.3,seed=2", "bigbird:block=8,w=1,g=1,r=2,seed=3",
                                          "sliding_window:w=6 & causal"};
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {7, 7}, {97, 97}, {33, 61}};
  for (const std::string& spec : specs) {
    for (const auto& [n_q, n_k] : shapes) {
      for (const auto& [bm, bn] : std::vector<std::pair<int64_t, int64_t>>{{8, 8}, {5, 3}}) {
        const Mask blocks = as_blocks(spec, n_q, n_k, bm, bn);
        const Mask pairs = as_pairs(spec, n_q, n_k);
        ASSERT_EQ(blocks.nnz(), pairs.nnz());
        for (Algorithm algorithm : {Algorithm::automatic, Algorithm::flash, Algorithm::small_cache}) {
          SCOPED_TRACE(spec + " " + std::to_string(n_q) + "x" + std::to_string(n_k) + " blocks " + std::to_string(bm) +
                       "x" + std::to_string(bn) + " " + spattn::algorithm_name(algorithm));
          expect_runs_as_the_pairs(blocks, pairs, algorithm, 4096);
        }
        const std::vector<IndexRange> rows = {{n_q / 2, n_q}, {0, n_q / 3}};
        const std::vector<IndexRange> cols = {{n_k / 4, n_k}};
        EXPECT_EQ(spattn::attended_keys(blocks, rows), spattn::attended_keys(pairs, rows));
        EXPECT_EQ(spattn::select_mask(blocks, rows, cols).nnz(), spattn::select_mask(pairs, rows, cols).nnz());
      }
    }
  }
}
