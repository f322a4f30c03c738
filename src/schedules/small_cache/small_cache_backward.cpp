// The small-cache backward (small_cache.hpp; docs/small_cache.md):
//   D  = rowsum(dO ∘ O)                streamed
//   P  = exp(scale Q K^T - LSE)        tiled; P made on each finished tile, written
//   dS = P ∘ (dO V^T - D)              tiled; dS made on each finished dP tile, written
//   dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO      tiled
#include "schedules/small_cache/small_cache.hpp"

#include "schedules/common/line_aligned_array.hpp"
#include "cpu/kernels/small_cache_kernels.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace spattn::schedules {
namespace {

using io::FastBuffer;
using io::FastMemory;
using io::Operand;
using namespace small_cache_detail;

// Forward line: P = exp(S - L). On each finished tile of scale Q K^T, loading LSE once per row
// block. A row with LSE = -inf attends nothing and gets P = 0 (never NaN).
class ProbabilitiesHooks final : public MatmulHooks {
 public:
  ProbabilitiesHooks(FastMemory& fast, SlowMatrix<const float> lse, int64_t tile_m)
      : lse_(lse), lse_rows_(fast.allocate<float>(tile_m, "small_cache LSE rows")) {}  // (tile_m)
  static_assert(kBackwardScoresRowWords == 1, "LSE");

  void begin_row_block(FastMemory& fast, int64_t row0, int64_t rows) override {
    fast.load(Operand::lse, lse_, row0, 0, rows, 1, lse_rows_, 0, 1);
  }

  void finish_tile(FastMemory& /*fast*/, int64_t /*row0*/, int64_t /*col0*/, int64_t rows,
                   int64_t cols, float* tile, int64_t ld, FastBuffer<float>& /*scratch*/) override {
    small_cache_kernels::exp_shifted_rows(tile, rows, cols, ld, lse_rows_.data());
  }

 private:
  SlowMatrix<const float> lse_;
  FastBuffer<float> lse_rows_;
};

// dS = P ∘ (dP - D) on each finished dP = dO V^T tile: D loaded once per row block, the P tile
// loaded into the free B chunk buffer a few rows at a time (its words are read exactly once).
class ScoreGradientHooks final : public MatmulHooks {
 public:
  ScoreGradientHooks(FastMemory& fast, SlowMatrix<const float> p, SlowMatrix<float> delta,
                     int64_t tile_m)
      : p_(p), delta_(delta), delta_rows_(fast.allocate<float>(tile_m, "small_cache D rows")) {}
  static_assert(kBackwardDScoresRowWords == 1, "D");

  void begin_row_block(FastMemory& fast, int64_t row0, int64_t rows) override {
    fast.load(Operand::delta, delta_, row0, 0, rows, 1, delta_rows_, 0, 1);
  }

  void finish_tile(FastMemory& fast, int64_t row0, int64_t col0, int64_t rows, int64_t cols,
                   float* tile, int64_t ld, FastBuffer<float>& scratch) override {
    const int64_t chunk_rows = std::max<int64_t>(1, scratch.words() / cols);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows) {
      const int64_t count = std::min(chunk_rows, rows - r0);
      fast.load(Operand::p, p_, row0 + r0, col0, count, cols, scratch, 0, cols);
      for (int64_t r = 0; r < count; ++r) {
        float* ds_row = tile + (r0 + r) * ld;
        const float* p_row = scratch.data() + r * cols;
        const float delta = delta_rows_[r0 + r];
        for (int64_t c = 0; c < cols; ++c) ds_row[c] = p_row[c] * (ds_row[c] - delta);
      }
    }
  }

 private:
  SlowMatrix<const float> p_;
  SlowMatrix<float> delta_;
  FastBuffer<float> delta_rows_;
};

// D = rowsum(dO ∘ O), streamed in chunks of rows x cols; the row chunks worker, worker + workers,
// ... of them.
void row_dot(FastMemory& fast, const HeadBackward& head, const SmallCacheTiles& tiles, int worker,
             int workers) {
  const int64_t m = head.o.rows();
  const int64_t dv = head.o.cols();
  const int64_t chunk_rows = tiles.delta_rows;
  const int64_t chunk_cols = tiles.delta_cols;
  auto o_chunk = fast.allocate<float>(chunk_rows * chunk_cols, "small_cache O chunk");
  auto d_o_chunk = fast.allocate<float>(chunk_rows * chunk_cols, "small_cache dO chunk");
  auto sums = fast.allocate<float>(chunk_rows, "small_cache D rows");
  for (int64_t row0 = worker * chunk_rows; row0 < m; row0 += workers * chunk_rows) {
    const int64_t rows = std::min(chunk_rows, m - row0);
    std::fill(sums.data(), sums.data() + rows, 0.0f);
    for (int64_t col0 = 0; col0 < dv; col0 += chunk_cols) {
      const int64_t cols = std::min(chunk_cols, dv - col0);
      fast.load(Operand::o, head.o, row0, col0, rows, cols, o_chunk, 0, chunk_cols);
      fast.load(Operand::d_o, head.d_o, row0, col0, rows, cols, d_o_chunk, 0, chunk_cols);
      for (int64_t r = 0; r < rows; ++r) {
        float sum = sums[r];
        for (int64_t c = 0; c < cols; ++c) {
          sum += d_o_chunk[r * chunk_cols + c] * o_chunk[r * chunk_cols + c];
        }
        sums[r] = sum;
      }
    }
    fast.store(Operand::delta, sums, 0, 1, head.delta, row0, 0, rows, 1);
  }
}

template <typename T>
void check_rows_cols(const char* name, const SlowMatrix<T>& x, int64_t rows, int64_t cols,
                     const char* expected) {
  if (x.rows() != rows || x.cols() != cols) {
    fail("small_cache_backward: ", name, " is ", x.rows(), " x ", x.cols(), ", expected ", rows,
         " x ", cols, " (", expected, ")");
  }
}

HeadShape check_backward(const HeadBackward& head) {
  const HeadShape shape{head.q.rows(), head.k.rows(), head.q.cols(), head.v.cols()};
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int64_t d = shape.head_dim;
  const int64_t dv = shape.head_dim_v;
  if (head.k.cols() != d) {
    fail("small_cache_backward: k has head_dim ", head.k.cols(), ", q has ", d);
  }
  if (head.v.rows() != n) {
    fail("small_cache_backward: v has ", head.v.rows(), " rows, k has ", n);
  }
  check_rows_cols("o", head.o, m, dv, "seqlen_q x head_dim_v");
  check_rows_cols("lse", head.lse, m, 1, "seqlen_q x 1");
  check_rows_cols("d_o", head.d_o, m, dv, "seqlen_q x head_dim_v");
  check_rows_cols("delta", head.delta, m, 1, "seqlen_q x 1");
  check_rows_cols("dq", head.dq, m, d, "seqlen_q x head_dim");
  check_rows_cols("dk", head.dk, n, d, "seqlen_k x head_dim");
  check_rows_cols("dv", head.dv, n, dv, "seqlen_k x head_dim_v");
  return shape;
}

}  // namespace

namespace {

void backward_on(const Memories& memories, const HeadBackward& head, const SmallCacheTiles& tiles) {
  const HeadShape shape = check_backward(head);
  check_tiles("small_cache_backward", shape, tiles, Pass::backward);
  for (const FastMemory* fast : memories) check_room("small_cache_backward", *fast, tiles);
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int workers = static_cast<int>(memories.size());

  // Slow-memory scratch for P and dS (seqlen_q, seqlen_k), owned by this call.
  LineAlignedArray<float> p_storage(static_cast<size_t>(m * n));
  LineAlignedArray<float> ds_storage(static_cast<size_t>(m * n));
  const auto p = SlowMatrix<float>::dense(p_storage.data(), m, n);
  const auto p_in = SlowMatrix<const float>::dense(p_storage.data(), m, n);
  const auto ds = SlowMatrix<float>::dense(ds_storage.data(), m, n);
  const auto ds_in = SlowMatrix<const float>::dense(ds_storage.data(), m, n);

  run_on(memories,
         [&](FastMemory& fast, int worker) { row_dot(fast, head, tiles, worker, workers); });
  run_on(memories, [&](FastMemory& fast, int worker) {
    ProbabilitiesHooks hooks(fast, head.lse, tiles.scores.tile_m);
    tiled_matmul(fast, {Operand::q, head.q}, {Operand::k, head.k.transposed()}, {Operand::p, p},
                 tiles.scores, share({head.scale, false, &hooks}, worker, workers));
  });
  run_on(memories, [&](FastMemory& fast, int worker) {
    ScoreGradientHooks hooks(fast, p_in, head.delta, tiles.d_scores.tile_m);
    tiled_matmul(fast, {Operand::d_o, head.d_o}, {Operand::v, head.v.transposed()},
                 {Operand::ds, ds}, tiles.d_scores, share({1.0f, false, &hooks}, worker, workers));
  });
  // dQ, dK and dV read only P and dS: one team run for the three.
  run_on(memories, [&](FastMemory& fast, int worker) {
    tiled_matmul(fast, {Operand::ds, ds_in}, {Operand::k, head.k}, {Operand::dq, head.dq},
                 tiles.dq, share({head.scale, false, nullptr}, worker, workers));
    tiled_matmul(fast, {Operand::ds, ds_in.transposed()}, {Operand::q, head.q},
                 {Operand::dk, head.dk}, tiles.dk,
                 share({head.scale, false, nullptr}, worker, workers));
    tiled_matmul(fast, {Operand::p, p_in.transposed()}, {Operand::d_o, head.d_o},
                 {Operand::dv, head.dv}, tiles.dv, share({1.0f, false, nullptr}, worker, workers));
  });
}

}  // namespace

void small_cache_backward(FastMemory& fast, const HeadBackward& head,
                          const SmallCacheTiles& tiles) {
  backward_on({&fast}, head, tiles);
}

void small_cache_backward(cpu::WorkerMemories& workers, const HeadBackward& head,
                          const SmallCacheTiles& tiles) {
  backward_on(memories_of(workers), head, tiles);
}

}  // namespace spattn::schedules
