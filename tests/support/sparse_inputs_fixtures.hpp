// Sparse (CSR) Q, K, V for the sparse-input tests: random entries at a density, with an empty row
// in Q and an all-zero row of K, and their densified copies.
#pragma once

#include "support/test_helpers.hpp"

#include <spattn/attention.hpp>

#include <sparse_formats/convert.hpp>
#include <sparse_formats/csr.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace spattn::testing {

// The options of a preview (or a run) with fast memory M, `algorithm` and lines of `line_words`.
inline AttentionOptions planning_options(int64_t cache_words, Algorithm algorithm = Algorithm::automatic,
                                         int64_t line_words = 0) {
  AttentionOptions options;
  options.cache_words = cache_words;
  options.algorithm = algorithm;
  options.line_words = line_words;
  return options;
}

// The one-mask plan of a full (dense) head problem: plan_heads over Mask::full of its size.
inline Plan dense_plan(const bounds::DenseShape& shape, Pass pass, const HeadPlanOptions& options) {
  return plan_heads(shape, Mask::full(std::max<int64_t>(shape.seqlen_q, 0), std::max<int64_t>(shape.seqlen_k, 0)), pass,
                    options);
}

struct SparseInput {
  std::vector<float> dense;                           // (rows, cols), zeros where nothing is stored
  sparse_formats::CsrMatrix<int64_t, float> csr;      // the same matrix, nonzeros stored
};

// Entries uniform in [-scale, scale), each kept with probability `density`; row `empty_row` (when
// in range) has no entry at all.
inline SparseInput sparse_input(int64_t rows, int64_t cols, double density, uint32_t seed,
                                int64_t empty_row = -1, float scale = 1.0f) {
  SparseInput input;
  input.dense = random_floats(rows * cols, seed);
  std::mt19937 engine(seed ^ 0x5bd1e995u);
  std::bernoulli_distribution keep(density);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float& x = input.dense[static_cast<size_t>(r * cols + c)];
      x = (r == empty_row || !keep(engine)) ? 0.0f : scale * x;
    }
  }
  input.csr = sparse_formats::dense_to_csr<int64_t, float>(input.dense.data(), rows, cols);
  return input;
}

// Bit for bit equal outputs (no NaN appears; -inf == -inf for an empty row's LSE; the sign of zero
// counts).
inline void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::signbit(a[i]), std::signbit(b[i])) << what << "[" << i << "]";
    ASSERT_EQ(a[i], b[i]) << what << "[" << i << "]";
  }
}

}  // namespace spattn::testing
