#include <spattn/bounds.hpp>

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>

namespace spattn::bounds {

namespace {

void check_cache(double cache_words, const char* who) {
  if (!(cache_words > 0.0) || !std::isfinite(cache_words)) {
    fail(who, ": cache size M = ", cache_words, " words must be positive and finite");
  }
}

void check_shape(const DenseShape& shape, const char* who) {
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail(who, ": seqlen_q = ", shape.seqlen_q, ", seqlen_k = ", shape.seqlen_k,
         ", head_dim = ", shape.head_dim, ", head_dim_v = ", shape.head_dim_v,
         " must all be >= 0");
  }
}

Bound make_bound(double large, double small, double crossover) {
  Bound bound;
  bound.large_cache = large;
  bound.small_cache = small;
  bound.branch = large <= small ? Branch::large_cache : Branch::small_cache;
  bound.value = std::min(large, small);
  bound.crossover_m = crossover;
  return bound;
}

double value_dim(const DenseShape& shape) {
  return static_cast<double>(shape.head_dim_v > 0 ? shape.head_dim_v : shape.head_dim);
}

// A head's sizes as doubles: seqlen_q, seqlen_k, head_dim, head_dim_v.
struct Sizes {
  double nq, nk, d, dv;
};
Sizes sizes_of(const DenseShape& shape, const char* where) {
  check_shape(shape, where);
  return {static_cast<double>(shape.seqlen_q), static_cast<double>(shape.seqlen_k),
          static_cast<double>(shape.head_dim), value_dim(shape)};
}

}  // namespace

const char* branch_name(Branch branch) {
  return branch == Branch::large_cache ? "large-cache (1/M)" : "small-cache (1/sqrt M)";
}

Bound dense_forward(const DenseShape& shape, double cache_words) {
  check_shape(shape, "bounds::dense_forward");
  check_cache(cache_words, "bounds::dense_forward");
  const double pairs = static_cast<double>(shape.seqlen_q) * static_cast<double>(shape.seqlen_k);
  const double d = static_cast<double>(shape.head_dim);
  return make_bound(pairs * d * d / cache_words, pairs * d / std::sqrt(cache_words), d * d);
}

Bound dense_backward(const DenseShape& shape, double cache_words) {
  check_shape(shape, "bounds::dense_backward");
  check_cache(cache_words, "bounds::dense_backward");
  const double pairs = static_cast<double>(shape.seqlen_q) * static_cast<double>(shape.seqlen_k);
  const double n = static_cast<double>(std::max(shape.seqlen_q, shape.seqlen_k));
  const double d = static_cast<double>(shape.head_dim);
  return make_bound((pairs * d * d + n * d * d * d) / cache_words,
                    (pairs * d + n * d * d) / std::sqrt(cache_words), d * d);
}

Bound sparse(double z_input, double z_qk, double cache_words) {
  check_cache(cache_words, "bounds::sparse");
  if (!(z_input >= 0.0) || !(z_qk >= 0.0)) {
    fail("bounds::sparse: Z_input = ", z_input, " and Z_QK = ", z_qk, " must be >= 0");
  }
  const double crossover = z_qk > 0.0 ? z_input * z_input / z_qk : 0.0;
  return make_bound(z_input * z_input / cache_words, z_input * std::sqrt(z_qk / cache_words),
                    crossover);
}

double compulsory_forward(const DenseShape& shape) {
  const auto [nq, nk, d, dv] = sizes_of(shape, "bounds::compulsory_forward");
  return nq * d + nk * (d + dv) + nq * dv + nq;
}

double compulsory_backward(const DenseShape& shape) {
  const auto [nq, nk, d, dv] = sizes_of(shape, "bounds::compulsory_backward");
  const double inputs = nq * d + nk * (d + dv) + nq * dv /* O */ + nq /* LSE */ + nq * dv /* dO */;
  const double outputs = nq * d + nk * (d + dv);
  return inputs + outputs;
}

double matmul_lower_bound(double a, double k, double b, double cache_words) {
  check_cache(cache_words, "bounds::matmul_lower_bound");
  return std::max(0.0, 2.0 * a * k * b / std::sqrt(cache_words) - 2.0 * cache_words);
}

}  // namespace spattn::bounds
