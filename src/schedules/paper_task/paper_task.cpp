// The paper's task g = dL/dX on the two-level memory (include/spattn/paper.hpp).
#include <spattn/paper.hpp>

#include "schedules/flash/flash.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/common/tiled_matmul.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace spattn {

namespace {

using io::Operand;
using io::SlowMatrix;
using schedules::IoCount;
using schedules::MatmulTiles;

// dO = O - E, streamed in chunks of whole rows (the chunk is the only buffer).
struct ResidualPass {
  int64_t rows_per_chunk = 1;
};

// Fast memory: an O chunk and an E chunk of rows_per_chunk x d each.
ResidualPass residual_pass_tiles(int64_t n, int64_t d, int64_t cache_words) {
  ResidualPass pass;
  const int64_t row_words = 2 * std::max<int64_t>(d, 1);
  pass.rows_per_chunk = std::max<int64_t>(1, std::min(n, cache_words / row_words));
  return pass;
}

// Reads O and E once, writes dO once.
IoCount predict_residual(int64_t n, int64_t d) { return {2 * n * d, n * d}; }

void residual(io::FastMemory& fast, SlowMatrix<const float> o, SlowMatrix<const float> e,
              SlowMatrix<float> d_o, int64_t n, int64_t d, const ResidualPass& tiles) {
  const int64_t rows = tiles.rows_per_chunk;
  auto o_chunk = fast.allocate<float>(rows * d, "O chunk (dO = O - E)");
  auto e_chunk = fast.allocate<float>(rows * d, "E chunk (dO = O - E)");
  for (int64_t row0 = 0; row0 < n; row0 += rows) {
    const int64_t count = std::min(rows, n - row0);
    fast.load(Operand::o, o, row0, 0, count, d, o_chunk, 0, d);
    fast.load(Operand::e, e, row0, 0, count, d, e_chunk, 0, d);
    for (int64_t i = 0; i < count * d; ++i) o_chunk[i] -= e_chunk[i];
    fast.store(Operand::d_o, o_chunk, 0, d, d_o, row0, 0, count, d);
  }
}

// Every tile of the task, chosen once for (n, d, M).
struct PaperTiles {
  Algorithm algorithm = Algorithm::flash;
  MatmulTiles q_product;  // Q = A1 X: (n, d) x (d, d)
  MatmulTiles g_product;  // g = A1^T dQ: (d, n) x (n, d)
  ResidualPass residual;
  schedules::FlashTiles flash_forward, flash_backward;
  schedules::SmallCacheTiles small_forward, small_backward;
};

schedules::HeadShape head(int64_t n, int64_t d) { return {n, n, d, d}; }

IoCount predict(int64_t n, int64_t d, const PaperTiles& t) {
  IoCount total = schedules::predict_tiled_matmul(n, d, d, t.q_product);  // Q = A1 X
  total += schedules::predict_tiled_matmul(n, d, d, t.q_product);         // V = A3 Y
  if (t.algorithm == Algorithm::flash) {
    total += schedules::predict_flash_forward(head(n, d), t.flash_forward);
    total += schedules::predict_flash_backward(head(n, d), t.flash_backward);
  } else {
    total += schedules::predict_small_cache_forward(head(n, d), t.small_forward);
    total += schedules::predict_small_cache_backward(head(n, d), t.small_backward);
  }
  total += predict_residual(n, d);
  total += schedules::predict_tiled_matmul(d, n, d, t.g_product);
  return total;
}

PaperTiles choose_tiles(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm) {
  if (n < 0 || d < 0) fail("paper_gradient: n = ", n, " and d = ", d, " must be >= 0");
  if (cache_words < 1) fail("paper_gradient: M = ", cache_words, " words must be >= 1");
  if (algorithm == Algorithm::automatic) {
    // The cheaper of the two, among those that fit.
    const auto shape = head(n, d);
    const bool flash_fits = cache_words >= schedules::flash_min_cache_words(shape, Pass::backward);
    const bool small_fits = cache_words >= schedules::small_cache_min_cache_words(shape, Pass::backward) &&
                            cache_words >= schedules::tiled_matmul_min_cache_words();
    if (flash_fits && small_fits) {
      const PaperTiles f = choose_tiles(n, d, cache_words, Algorithm::flash);
      const PaperTiles s = choose_tiles(n, d, cache_words, Algorithm::small_cache);
      return predict(n, d, f).total() <= predict(n, d, s).total() ? f : s;
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

PaperPlan make_plan(int64_t n, int64_t d, int64_t cache_words, const PaperTiles& tiles) {
  PaperPlan plan;
  plan.n = n;
  plan.d = d;
  plan.cache_words = cache_words;
  plan.algorithm = tiles.algorithm;
  const IoCount io = predict(n, d, tiles);
  plan.reads = io.reads;
  plan.writes = io.writes;
  plan.bound = bounds::dense_backward({n, n, d, d}, static_cast<double>(cache_words));
  plan.ratio_to_bound = plan.bound.value > 0.0 ? static_cast<double>(plan.total()) / plan.bound.value : 0.0;
  return plan;
}

}  // namespace

PaperPlan plan_paper_gradient(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm) {
  return make_plan(n, d, cache_words, choose_tiles(n, d, cache_words, algorithm));
}

PaperPlan paper_gradient(const PaperInputs& in, float* g, int64_t cache_words, Algorithm algorithm,
                         io::Ledger* ledger) {
  const int64_t n = in.n, d = in.d;
  const PaperTiles tiles = choose_tiles(n, d, cache_words, algorithm);
  if (n > 0 && d > 0) {
    const std::pair<const char*, const float*> inputs[] = {
        {"a1", in.a1}, {"a2", in.a2}, {"a3", in.a3}, {"e", in.e}, {"x", in.x}, {"y", in.y}};
    for (const auto& [name, pointer] : inputs) {
      if (pointer == nullptr) fail("paper_gradient: ", name, " is null but n = ", n, ", d = ", d);
    }
  }
  if (d > 0 && g == nullptr) fail("paper_gradient: g is null but d = ", d);
  if (!std::isfinite(in.scale)) fail("paper_gradient: scale = ", in.scale, " must be finite");

  // Slow-memory intermediates: Q, V, O, LSE, dO, D, dQ, dK, dV.
  const auto nd = static_cast<size_t>(n * d);
  std::vector<float> q(nd), v(nd), o(nd), lse(static_cast<size_t>(n)), d_o(nd), delta(static_cast<size_t>(n)),
      dq(nd), dk(nd), dv(nd);
  auto matrix = [](const float* p, int64_t rows, int64_t cols) { return SlowMatrix<const float>(p, rows, cols, cols); };
  auto out = [](std::vector<float>& p, int64_t rows, int64_t cols) { return SlowMatrix<float>::dense(p.data(), rows, cols); };
  const auto a1 = matrix(in.a1, n, d), a2 = matrix(in.a2, n, d), a3 = matrix(in.a3, n, d), e = matrix(in.e, n, d);
  const auto x = matrix(in.x, d, d), y = matrix(in.y, d, d);

  const char* name = tiles.algorithm == Algorithm::flash ? "paper gradient (flash)" : "paper gradient (small_cache)";
  io::FastMemory fast(cache_words, ledger, name);
  using schedules::MatmulInput;
  using schedules::MatmulOutput;
  schedules::tiled_matmul(fast, MatmulInput{Operand::a1, a1}, MatmulInput{Operand::x, x},
                          MatmulOutput{Operand::q, out(q, n, d)}, tiles.q_product);
  schedules::tiled_matmul(fast, MatmulInput{Operand::a3, a3}, MatmulInput{Operand::y, y},
                          MatmulOutput{Operand::v, out(v, n, d)}, tiles.q_product);
  const schedules::HeadForward forward{matrix(q.data(), n, d), a2, matrix(v.data(), n, d), out(o, n, d),
                                       out(lse, n, 1), in.scale};
  if (tiles.algorithm == Algorithm::flash) {
    schedules::flash_forward(fast, forward, tiles.flash_forward);
  } else {
    schedules::small_cache_forward(fast, forward, tiles.small_forward);
  }
  residual(fast, matrix(o.data(), n, d), e, out(d_o, n, d), n, d, tiles.residual);
  const schedules::HeadBackward backward{
      matrix(q.data(), n, d), a2, matrix(v.data(), n, d), matrix(o.data(), n, d), matrix(lse.data(), n, 1),
      matrix(d_o.data(), n, d), out(delta, n, 1), out(dq, n, d), out(dk, n, d), out(dv, n, d), in.scale};
  if (tiles.algorithm == Algorithm::flash) {
    schedules::flash_backward(fast, backward, tiles.flash_backward);
  } else {
    schedules::small_cache_backward(fast, backward, tiles.small_backward);
  }
  // dQ already carries the scale (dQ = scale dS K), and dL/dX = scale A1^T dS A2 = A1^T dQ.
  schedules::tiled_matmul(fast, MatmulInput{Operand::a1, a1.transposed()}, MatmulInput{Operand::dq, matrix(dq.data(), n, d)},
                          MatmulOutput{Operand::g, SlowMatrix<float>::dense(g, d, d)}, tiles.g_product);
  return make_plan(n, d, cache_words, tiles);
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
