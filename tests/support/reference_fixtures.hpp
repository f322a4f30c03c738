// Small builders shared by the tests that talk to the fp64 reference: masks from a predicate or
// a pattern spec, seeded random values, and contiguous views.
#pragma once

#include <spattn/tensor.hpp>

#include <sparse_formats/csr.hpp>
#include <sparse_formats/patterns.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace spattn::testing {

// The pattern of the pairs (i, j) where attends(i, j) holds (rows x cols, O(rows * cols): for
// small hand-made masks only).
template <typename Index = int32_t>
sparse_formats::CsrPattern<Index> make_mask(int64_t rows, int64_t cols,
                                            const std::function<bool(int64_t, int64_t)>& attends) {
  auto mask = sparse_formats::CsrPattern<Index>::empty(rows, cols);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      if (attends(i, j)) mask.col_idx.push_back(static_cast<Index>(j));
    }
    mask.row_ptr[static_cast<std::size_t>(i + 1)] = static_cast<Index>(mask.col_idx.size());
  }
  return mask;
}

// The pattern a PATTERN-SPEC names (sparse_formats/patterns.hpp), rows x cols.
template <typename Index = int64_t>
sparse_formats::CsrPattern<Index> pattern_of(const std::string& spec, int64_t rows, int64_t cols) {
  return sparse_formats::make_pattern<Index>(sparse_formats::parse_pattern_spec(spec), rows, cols);
}

// `count` values uniform in [-1, 1), the same for the same seed.
inline std::vector<double> random_values(std::size_t count, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(count);
  for (double& value : values) value = uniform(engine);
  return values;
}

inline TensorView<const double> view(const std::vector<double>& data, int64_t batch, int64_t heads,
                                     int64_t seqlen, int64_t head_dim) {
  return TensorView<const double>::contiguous(data.data(), batch, heads, seqlen, head_dim);
}

}  // namespace spattn::testing
