// The paper's task g = dL/dX on the two-level memory (paper_task.hpp).
#include "schedules/paper_task/paper_task.hpp"

#include <algorithm>
#include <vector>

namespace spattn::schedules {

namespace {

using io::Operand;

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

HeadShape head(int64_t n, int64_t d) { return {n, n, d, d}; }

}  // namespace

IoCount predict_paper_task(int64_t n, int64_t d, const PaperTiles& t) {
  IoCount total = predict_tiled_matmul(n, d, d, t.q_product);  // Q = A1 X
  total += predict_tiled_matmul(n, d, d, t.q_product);         // V = A3 Y
  if (t.algorithm == Algorithm::flash) {
    total += predict_flash_forward(head(n, d), t.flash_forward);
    total += predict_flash_backward(head(n, d), t.flash_backward);
  } else {
    total += predict_small_cache_forward(head(n, d), t.small_forward);
    total += predict_small_cache_backward(head(n, d), t.small_backward);
  }
  total += predict_residual(n, d);
  total += predict_tiled_matmul(d, n, d, t.g_product);
  return total;
}

void run_paper_task(io::FastMemory& fast, const PaperOperands& in, const PaperTiles& tiles) {
  const int64_t n = in.n, d = in.d;
  // Slow-memory intermediates: Q, V, O, LSE, dO, D, dQ, dK, dV.
  const auto nd = static_cast<size_t>(n * d);
  std::vector<float> q(nd), v(nd), o(nd), lse(static_cast<size_t>(n)), d_o(nd), delta(static_cast<size_t>(n)),
      dq(nd), dk(nd), dv(nd);
  auto matrix = [](const float* p, int64_t rows, int64_t cols) { return SlowMatrix<const float>(p, rows, cols, cols); };
  auto out = [](std::vector<float>& p, int64_t rows, int64_t cols) { return SlowMatrix<float>::dense(p.data(), rows, cols); };

  tiled_matmul(fast, MatmulInput{Operand::a1, in.a1}, MatmulInput{Operand::x, in.x}, MatmulOutput{Operand::q, out(q, n, d)},
               tiles.q_product);
  tiled_matmul(fast, MatmulInput{Operand::a3, in.a3}, MatmulInput{Operand::y, in.y}, MatmulOutput{Operand::v, out(v, n, d)},
               tiles.q_product);
  const HeadForward forward{matrix(q.data(), n, d), in.a2, matrix(v.data(), n, d), out(o, n, d), out(lse, n, 1), in.scale};
  if (tiles.algorithm == Algorithm::flash) {
    flash_forward(fast, forward, tiles.flash_forward);
  } else {
    small_cache_forward(fast, forward, tiles.small_forward);
  }
  residual(fast, matrix(o.data(), n, d), in.e, out(d_o, n, d), n, d, tiles.residual);
  const HeadBackward backward{
      matrix(q.data(), n, d), in.a2, matrix(v.data(), n, d), matrix(o.data(), n, d), matrix(lse.data(), n, 1),
      matrix(d_o.data(), n, d), out(delta, n, 1), out(dq, n, d), out(dk, n, d), out(dv, n, d), in.scale};
  if (tiles.algorithm == Algorithm::flash) {
    flash_backward(fast, backward, tiles.flash_backward);
  } else {
    small_cache_backward(fast, backward, tiles.small_backward);
  }
  // dQ already carries the scale (dQ = scale dS K), and dL/dX = scale A1^T dS A2 = A1^T dQ.
  tiled_matmul(fast, MatmulInput{Operand::a1, in.a1.transposed()}, MatmulInput{Operand::dq, matrix(dq.data(), n, d)},
               MatmulOutput{Operand::g, in.g}, tiles.g_product);
}

}  // namespace spattn::schedules
