// merge_attention_partials (include/spattn/shard.hpp): attention over two disjoint sets of keys,
// combined through their row logsumexps.
#include <spattn/shard.hpp>

#include "api/checks.hpp"
#include "reference/finite_values.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace spattn {

namespace {

constexpr const char* kWhere = "merge_attention_partials";

// `t` has `expected`'s shape exactly (and data when it has elements).
template <typename T, typename U>
void check_same_shape(const char* name, const TensorView<T>& t, const char* expected_name,
                      const TensorView<U>& expected) {
  for (size_t dim = 0; dim < 4; ++dim) {
    if (t.shape[dim] < 0) fail(kWhere, ": ", name, " has a negative extent ", t.shape[dim], " in dimension ", dim);
    if (t.shape[dim] != expected.shape[dim]) {
      fail(kWhere, ": ", name, " has extent ", t.shape[dim], " in dimension ", dim, ", ", expected_name, " has ",
           expected.shape[dim]);
    }
  }
  if (t.data == nullptr && t.numel() > 0) fail(kWhere, ": ", name, " has no data but ", t.numel(), " elements");
}

void check_arguments(const TensorView<float>& o, const TensorView<float>& lse, const TensorView<const float>& o_part,
                     const TensorView<const float>& lse_part) {
  for (size_t dim = 0; dim < 4; ++dim) {
    if (o.shape[dim] < 0) fail(kWhere, ": o has a negative extent ", o.shape[dim], " in dimension ", dim);
  }
  if (o.data == nullptr && o.numel() > 0) fail(kWhere, ": o has no data but ", o.numel(), " elements");
  check_same_shape("o_part", o_part, "o", o);
  if (lse.head_dim() != 1) fail(kWhere, ": lse must have last extent 1, has ", lse.head_dim());
  for (size_t dim = 0; dim < 3; ++dim) {
    if (lse.shape[dim] != o.shape[dim]) {
      fail(kWhere, ": lse has extent ", lse.shape[dim], " in dimension ", dim, ", o has ", o.shape[dim]);
    }
  }
  if (lse.data == nullptr && lse.numel() > 0) fail(kWhere, ": lse has no data but ", lse.numel(), " elements");
  check_same_shape("lse_part", lse_part, "lse", lse);
  // o and lse are written while o_part and lse_part are read: no two of them may share memory.
  api_detail::check_outputs_apart(kWhere, {api_detail::named("o", o), api_detail::named("lse", lse)},
                                  {api_detail::named("o_part", o_part), api_detail::named("lse_part", lse_part)});
  // An lse of -inf is an empty side; NaN and +inf are no logsumexp of finite scores.
  reference::check_finite(kWhere, "o", TensorView<const float>(o));
  reference::check_finite(kWhere, "lse", TensorView<const float>(lse), /*minus_infinity_allowed=*/true);
  reference::check_finite(kWhere, "o_part", o_part);
  reference::check_finite(kWhere, "lse_part", lse_part, /*minus_infinity_allowed=*/true);
}

}  // namespace

void merge_attention_partials(TensorView<float> o, TensorView<float> lse, TensorView<const float> o_part,
                              TensorView<const float> lse_part) {
  check_arguments(o, lse, o_part, lse_part);
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  const int64_t head_dim_v = o.head_dim();
  for (int64_t b = 0; b < o.batch(); ++b) {
    for (int64_t h = 0; h < o.heads(); ++h) {
      for (int64_t i = 0; i < o.seqlen(); ++i) {
        float& row_lse = lse.at(b, h, i, 0);
        const float part_lse = lse_part.at(b, h, i, 0);
        float* row = o.row(b, h, i);
        const float* part = o_part.row(b, h, i);
        // The empty sides are special-cased rather than left to the arithmetic: exp(-inf - -inf)
        // is NaN, and 0 * o + 1 * o_part would turn -0 into +0.
        if (part_lse == minus_infinity) {
          if (row_lse == minus_infinity) {
            for (int64_t j = 0; j < head_dim_v; ++j) row[j * o.stride[3]] = 0.0f;
          }
          continue;
        }
        if (row_lse == minus_infinity) {
          for (int64_t j = 0; j < head_dim_v; ++j) row[j * o.stride[3]] = part[j * o_part.stride[3]];
          row_lse = part_lse;
          continue;
        }
        const float m = std::max(row_lse, part_lse);
        const float w = std::exp(row_lse - m);
        const float w_part = std::exp(part_lse - m);
        const float sum = w + w_part;  // in [1, 2]: one of the weights is exp(0) = 1
        for (int64_t j = 0; j < head_dim_v; ++j) {
          float& x = row[j * o.stride[3]];
          x = (w * x + w_part * part[j * o_part.stride[3]]) / sum;
        }
        row_lse = m + std::log(sum);
      }
    }
  }
}

}  // namespace spattn
