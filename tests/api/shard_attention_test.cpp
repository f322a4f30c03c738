// What context parallelism relies on (include/spattn/shard.hpp, docs/api.md "Shards"): attention
// over key parts (select_mask over all rows and the part's cols), merged with
// merge_attention_partials, equals attention over all keys; the backward over each part with the
// merged o and lse gives the part's rows of dk, dv and a dq that sums over the parts to the full
// dq; and a shard of query rows gives its rows of the full result.
#include <spattn/attention.hpp>
#include <spattn/shard.hpp>

#include "support/api_problem.hpp"
#include "support/compare.hpp"
#include "support/index_ranges.hpp"
#include "support/test_helpers.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using spattn::Algorithm;
using spattn::IndexRange;
using spattn::Mask;
using spattn::select_mask;
using spattn::TensorView;
using spattn::testing::ApiProblem;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::widen;

namespace {

using spattn::testing::positions_of;
using spattn::testing::Ranges;

constexpr int64_t kBatch = 2, kHeads = 4, kKvHeads = 2, kDim = 16;
constexpr int64_t kGroup = kHeads / kKvHeads;

// Row i attends key j <= i with (i + j) % 3 != 0, except rows i % 5 == 2, which attend nothing;
// early rows attend nothing in the later key parts as well.
Mask with_empty_rows(int64_t n) {
  sparse_formats::CsrPattern<int64_t> pattern(n, n, {0}, {});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i && i % 5 != 2; ++j) {
      if ((i + j) % 3 != 0) pattern.col_idx.push_back(j);
    }
    pattern.row_ptr.push_back(pattern.nnz());
  }
  return Mask::from_csr(std::move(pattern), "with_empty_rows");
}

// Rows [r.begin, r.end) of a (batch, heads, seqlen, dim) view.
TensorView<const float> rows_of(TensorView<const float> t, IndexRange r) {
  t.data += r.begin * t.stride[2];
  t.shape[2] = r.end - r.begin;
  return t;
}

// The rows at `positions` of a contiguous (batch, heads, seqlen, dim) array, in that order.
std::vector<float> gather_rows(const std::vector<float>& x, int64_t heads, int64_t seqlen, int64_t dim,
                               const std::vector<int64_t>& positions) {
  std::vector<float> out;
  for (int64_t bh = 0; bh < kBatch * heads; ++bh) {
    for (const int64_t p : positions) {
      const auto first = x.begin() + (bh * seqlen + p) * dim;
      out.insert(out.end(), first, first + dim);
    }
  }
  return out;
}

double grad_tolerance(const ApiProblem& full) {
  const double magnitude =
      std::max({max_abs(widen(full.dq)), max_abs(widen(full.dk)), max_abs(widen(full.dv))});
  // Two float32 computations of one value, a kv head's gradient summing kGroup query heads'.
  return 2.0 * spattn::testing::fp32_tolerance(kDim + full.n_k, magnitude) * static_cast<double>(kGroup);
}

// Forward and backward over the key `parts` of `mask` against the run over all keys.
void expect_key_parts_match(const Mask& mask, const Ranges& parts, Algorithm algorithm) {
  const int64_t n_q = mask.seqlen_q(), n_k = mask.seqlen_k();
  ApiProblem full(kBatch, kHeads, kKvHeads, n_q, n_k, kDim, 5);
  const spattn::AttentionOptions options = spattn::testing::options_for(algorithm, 1024);
  full.run({mask}, options);
  const auto q = full.in(full.q, kHeads, n_q, kDim), k = full.in(full.k, kKvHeads, n_k, kDim),
             v = full.in(full.v, kKvHeads, n_k, kDim);

  std::vector<float> o, lse;
  std::vector<Mask> part_masks;
  for (const IndexRange& part : parts) {
    part_masks.push_back(select_mask(mask, {{0, n_q}}, {part}));
    std::vector<float> o_part(full.size(kHeads, n_q)), lse_part(static_cast<size_t>(kBatch * kHeads * n_q));
    spattn::attention_forward(q, rows_of(k, part), rows_of(v, part), full.out(o_part, kHeads, n_q, kDim),
                              full.out(lse_part, kHeads, n_q, 1), part_masks.back(), options);
    if (o.empty()) {
      o = o_part;
      lse = lse_part;
    } else {
      spattn::merge_attention_partials(full.out(o, kHeads, n_q, kDim), full.out(lse, kHeads, n_q, 1),
                                       full.in(o_part, kHeads, n_q, kDim), full.in(lse_part, kHeads, n_q, 1));
    }
  }
  const double tolerance = 2.0 * spattn::testing::fp32_tolerance(kDim + n_k, 1.0);
  EXPECT_LE(max_abs_error(o, widen(full.o)), tolerance);
  EXPECT_LE(max_abs_error(lse, widen(full.lse)), tolerance);  // -inf (rows attending nothing) exactly
  EXPECT_GT(max_abs(widen(full.o)), 0.05);

  std::vector<float> dq(full.size(kHeads, n_q), 0.0f);
  const double grad_tol = grad_tolerance(full);
  for (size_t p = 0; p < parts.size(); ++p) {
    const int64_t length = parts[p].end - parts[p].begin;
    std::vector<float> dq_part(dq.size()), dk_part(full.size(kKvHeads, length)), dv_part(dk_part.size());
    spattn::attention_backward(q, rows_of(k, parts[p]), rows_of(v, parts[p]), full.in(o, kHeads, n_q, kDim),
                               full.in(lse, kHeads, n_q, 1), full.in(full.d_o, kHeads, n_q, kDim),
                               full.out(dq_part, kHeads, n_q, kDim), full.out(dk_part, kKvHeads, length, kDim),
                               full.out(dv_part, kKvHeads, length, kDim), part_masks[p], options);
    for (size_t i = 0; i < dq.size(); ++i) dq[i] += dq_part[i];
    const std::vector<int64_t> keys = positions_of({parts[p]});
    EXPECT_LE(max_abs_error(dk_part, widen(gather_rows(full.dk, kKvHeads, n_k, kDim, keys))), grad_tol) << "part " << p;
    EXPECT_LE(max_abs_error(dv_part, widen(gather_rows(full.dv, kKvHeads, n_k, kDim, keys))), grad_tol) << "part " << p;
  }
  EXPECT_LE(max_abs_error(dq, widen(full.dq)), grad_tol * static_cast<double>(parts.size()));
  EXPECT_GT(max_abs(widen(full.dq)), 1e-3);
  EXPECT_GT(max_abs(widen(full.dk)), 1e-3);
}

struct KeySplit {
  std::string name;
  Mask mask;
  Ranges parts;
};

std::vector<KeySplit> key_splits() {
  const Mask causal = Mask::from_spec("causal", 97, 97);
  return {
      {"causal in 2", causal, {{0, 40}, {40, 97}}},
      {"causal in 3", causal, {{0, 31}, {31, 64}, {64, 97}}},  // rows 0..30 attend nothing in parts 2, 3
      {"window with a one-key part", Mask::from_spec("sliding_window:w=9", 97, 97), {{0, 33}, {33, 34}, {34, 97}}},
      {"rectangular random", Mask::from_spec("random:p=0.1,seed=4", 61, 97), {{0, 50}, {50, 97}}},
      {"empty rows", with_empty_rows(97), {{0, 23}, {23, 60}, {60, 97}}},
  };
}

}  // namespace

TEST(ContextParallel, KeyPartsMergeToAttentionOverAllKeysForwardAndBackward) {
  EXPECT_EQ(with_empty_rows(97).csr().row_length(2), 0);  // the empty-rows case has them
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    for (const KeySplit& split : key_splits()) {
      SCOPED_TRACE(split.name + " " + spattn::algorithm_name(algorithm));
      expect_key_parts_match(split.mask, split.parts, algorithm);
    }
  }
}

TEST(ContextParallel, RowShardsGiveTheirRowsOfTheFullResult) {
  const int64_t n = 97;
  // Two shards of query rows, each two non-contiguous ranges, the first out of order.
  const std::vector<Ranges> shards = {{{50, 97}, {3, 30}}, {{30, 50}, {0, 3}}};
  for (const Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    for (const Mask& mask : {Mask::from_spec("causal", n, n), with_empty_rows(n)}) {
      SCOPED_TRACE(spattn::algorithm_name(algorithm));
      ApiProblem full(kBatch, kHeads, kKvHeads, n, n, kDim, 9);
      const spattn::AttentionOptions options = spattn::testing::options_for(algorithm, 1024);
      full.run({mask}, options);
      const auto k = full.in(full.k, kKvHeads, n, kDim), v = full.in(full.v, kKvHeads, n, kDim);
      std::vector<float> dk(full.dk.size(), 0.0f), dv(full.dv.size(), 0.0f);
      for (const Ranges& rows : shards) {
        const std::vector<int64_t> at = positions_of(rows);
        const auto count = static_cast<int64_t>(at.size());
        const Mask shard_mask = select_mask(mask, rows, {{0, n}});
        const std::vector<float> q = gather_rows(full.q, kHeads, n, kDim, at);
        const std::vector<float> d_o = gather_rows(full.d_o, kHeads, n, kDim, at);
        std::vector<float> o(q.size()), lse(static_cast<size_t>(kBatch * kHeads * count)), dq(q.size()),
            dk_shard(dk.size()), dv_shard(dv.size());
        spattn::attention_forward(full.in(q, kHeads, count, kDim), k, v, full.out(o, kHeads, count, kDim),
                                  full.out(lse, kHeads, count, 1), shard_mask, options);
        spattn::attention_backward(full.in(q, kHeads, count, kDim), k, v, full.in(o, kHeads, count, kDim),
                                   full.in(lse, kHeads, count, 1), full.in(d_o, kHeads, count, kDim),
                                   full.out(dq, kHeads, count, kDim), full.out(dk_shard, kKvHeads, n, kDim),
                                   full.out(dv_shard, kKvHeads, n, kDim), shard_mask, options);
        const double tolerance = 2.0 * spattn::testing::fp32_tolerance(kDim + n, 1.0);
        EXPECT_LE(max_abs_error(o, widen(gather_rows(full.o, kHeads, n, kDim, at))), tolerance);
        EXPECT_LE(max_abs_error(lse, widen(gather_rows(full.lse, kHeads, n, 1, at))), tolerance);
        EXPECT_LE(max_abs_error(dq, widen(gather_rows(full.dq, kHeads, n, kDim, at))), grad_tolerance(full));
        for (size_t i = 0; i < dk.size(); ++i) {
          dk[i] += dk_shard[i];
          dv[i] += dv_shard[i];
        }
      }
      // The shards' key gradients are partial: they add up to the full ones.
      EXPECT_LE(max_abs_error(dk, widen(full.dk)), 2.0 * grad_tolerance(full));
      EXPECT_LE(max_abs_error(dv, widen(full.dv)), 2.0 * grad_tolerance(full));
      EXPECT_GT(max_abs(widen(full.o)), 0.05);
    }
  }
}
