// The paper task's choice and plan (paper_plan.hpp, spattn/paper.hpp).
#include "plan/paper_plan.hpp"

#include "plan/dense_flash_tiles.hpp"
#include "plan/dense_small_cache_tiles.hpp"
#include "plan/matmul_tile_search.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cstdio>

namespace spattn {

namespace plan_detail {

namespace {

using schedules::PaperTiles;

schedules::HeadShape head(int64_t n, int64_t d) { return {n, n, d, d}; }

// As many whole rows of O and E as M holds.
schedules::ResidualPass residual_pass_tiles(int64_t n, int64_t d, int64_t cache_words) {
  schedules::ResidualPass pass;
  const int64_t row_words = 2 * std::max<int64_t>(d, 1);
  pass.rows_per_chunk = std::max<int64_t>(1, std::min(n, cache_words / row_words));
  return pass;
}

}  // namespace

PaperTiles paper_tiles(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm) {
  if (n < 0 || d < 0) fail("paper_gradient: n = ", n, " and d = ", d, " must be >= 0");
  if (cache_words < 1) fail("paper_gradient: M = ", cache_words, " words must be >= 1");
  if (algorithm == Algorithm::automatic) {
    // The cheaper of the two, among those that fit.
    const auto shape = head(n, d);
    const bool flash_fits = cache_words >= schedules::flash_min_cache_words(shape, Pass::backward);
    const bool small_fits = cache_words >= schedules::small_cache_min_cache_words(shape, Pass::backward) &&
                            cache_words >= schedules::tiled_matmul_min_cache_words();
    if (flash_fits && small_fits) {
      const PaperTiles f = paper_tiles(n, d, cache_words, Algorithm::flash);
      const PaperTiles s = paper_tiles(n, d, cache_words, Algorithm::small_cache);
      return schedules::predict_paper_task(n, d, f).total() <= schedules::predict_paper_task(n, d, s).total() ? f : s;
    }
    algorithm = flash_fits ? Algorithm::flash : Algorithm::small_cache;
  }
  if (algorithm != Algorithm::flash && algorithm != Algorithm::small_cache) {
    fail("paper_gradient: algorithm ", algorithm_name(algorithm), " is not a schedule; use flash, small_cache or auto");
  }
  PaperTiles t;
  t.algorithm = algorithm;
  t.q_product = schedules::choose_matmul_tiles(n, d, d, cache_words);
  t.g_product = schedules::choose_matmul_tiles(d, n, d, cache_words);
  t.residual = residual_pass_tiles(n, d, cache_words);
  if (2 * std::max<int64_t>(d, 1) > cache_words) {
    fail("paper_gradient: M = ", cache_words, " words cannot hold one row of O and of E (", 2 * d, " words)");
  }
  const auto shape = head(n, d);
  if (algorithm == Algorithm::flash) {
    t.flash_forward = schedules::flash_tiles(shape, cache_words, Pass::forward);
    t.flash_backward = schedules::flash_tiles(shape, cache_words, Pass::backward);
  } else {
    t.small_forward = schedules::small_cache_tiles(shape, cache_words, Pass::forward);
    t.small_backward = schedules::small_cache_tiles(shape, cache_words, Pass::backward);
  }
  return t;
}

PaperPlan paper_plan(int64_t n, int64_t d, int64_t cache_words, const PaperTiles& tiles) {
  PaperPlan plan;
  plan.n = n;
  plan.d = d;
  plan.cache_words = cache_words;
  plan.algorithm = tiles.algorithm;
  const schedules::IoCount io = schedules::predict_paper_task(n, d, tiles);
  plan.reads = io.reads;
  plan.writes = io.writes;
  plan.bound = bounds::dense_backward({n, n, d, d}, static_cast<double>(cache_words));
  plan.ratio_to_bound = plan.bound.value > 0.0 ? static_cast<double>(plan.total()) / plan.bound.value : 0.0;
  return plan;
}

}  // namespace plan_detail

PaperPlan plan_paper_gradient(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm) {
  return plan_detail::paper_plan(n, d, cache_words, plan_detail::paper_tiles(n, d, cache_words, algorithm));
}

std::string PaperPlan::to_string() const {
  char text[512];
  std::snprintf(text, sizeof text,
                "paper task g = dL/dX: n %lld, d %lld, M %lld words, attention tiling %s\n"
                "  predicted I/O: %lld words (%lld reads, %lld writes)\n"
                "  Theorem 1.1 bound: %.4g words (%s branch); ratio %.3g\n",
                static_cast<long long>(n), static_cast<long long>(d), static_cast<long long>(cache_words),
                algorithm_name(algorithm), static_cast<long long>(total()), static_cast<long long>(reads),
                static_cast<long long>(writes), bound.value, bounds::branch_name(bound.branch), ratio_to_bound);
  return text;
}

}  // namespace spattn
