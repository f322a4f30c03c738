// The density-adaptive small-cache backward (sparse_small_cache.hpp; docs/sparse_small_cache.md):
//   P  = exp(scale Q K^T - LSE)        SDDMM sweep at the mask, P written
//   dS = P ∘ (dO V^T - D)              SDDMM sweep, D = rowsum(dO ∘ O) fused, dS written
//   dQ = scale dS K                    SpMM sweep over the rows
//   dK = scale dS^T Q,  dV = P^T dO    SpMM sweeps over the transposed structure
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"
#include "schedules/common/line_aligned_array.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "cpu/kernels/scalar_exp.hpp"
#include "cpu/kernels/small_cache_kernels.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache_sweeps.hpp"

#include <spattn/error.hpp>

#include <cmath>
#include <limits>
#include <vector>

namespace spattn::schedules {
namespace {

using io::FastBuffer;
using io::FastMemory;
using io::Operand;
using namespace sparse_small_cache_detail;
using small_cache_detail::Memories;
using small_cache_detail::memories_of;
using small_cache_detail::run_on;

// Forward line: P = exp(S - L). The last chunk's sum becomes P with the row's LSE, loaded once
// per row block for the rows with entries (an attending row has a finite LSE). The exp is
// scalar_exp, as in the forward (one line of constants, not expf's five).
class Probabilities {
 public:
  Probabilities(FastMemory& fast, SlowMatrix<const float> lse, float scale, int64_t block_rows)
      : lse_(lse),
        scale_(scale),
        lse_rows_(fast.allocate<float>(block_rows, "sparse_small_cache LSE rows")) {}

  void begin_block(FastMemory& fast, const BlockWalker& walker) {
    for (int64_t r = 0; r < walker.rows(); ++r) {
      if (walker.nonempty(r))
        fast.load(Operand::lse, lse_, walker.row0() + r, 0, 1, 1, lse_rows_, r, 1);
    }
  }
  void begin_chunk(FastMemory& /*fast*/, const BlockWalker& /*walker*/, int64_t /*col0*/,
                   int64_t /*cols*/, const FastBuffer<float>& /*panel*/, int64_t /*ld*/,
                   FastBuffer<float>& /*b_rows*/) {}
  float finish(int64_t r, float sum, float /*companion*/) const {
    const float lse = lse_rows_[r];
    return lse == -std::numeric_limits<float>::infinity() ? 0.0f : scalar_exp(scale_ * sum - lse);
  }
  void end_block(FastMemory& /*fast*/, const BlockWalker& /*walker*/) {}

 private:
  SlowMatrix<const float> lse_;
  float scale_;
  FastBuffer<float> lse_rows_;  // (block_rows)
};

// Forward line: D_i = dO_i . O_i, then dS = P ∘ (dP - D). D accumulates chunk by chunk from the
// dO panel the sweep loads anyway and the O rows, streamed one at a time through the B row buffer
// (free before the walk), so D is complete when the last chunk finishes the entries. P is the
// sweep's companion array: each entry's P arrives with its run in the last chunk.
class ScoreGradient {
 public:
  ScoreGradient(FastMemory& fast, SlowMatrix<const float> o, int64_t block_rows)
      : o_(o), delta_rows_(fast.allocate<float>(block_rows, "sparse_small_cache D rows")) {}

  void begin_block(FastMemory& /*fast*/, const BlockWalker& walker) {
    std::fill(delta_rows_.data(), delta_rows_.data() + walker.rows(), 0.0f);
  }
  void begin_chunk(FastMemory& fast, const BlockWalker& walker, int64_t col0, int64_t cols,
                   const FastBuffer<float>& panel, int64_t ld, FastBuffer<float>& b_rows) {
    for (int64_t r = 0; r < walker.rows(); ++r) {
      if (!walker.nonempty(r)) continue;
      fast.load(Operand::o, o_, walker.row0() + r, col0, 1, cols, b_rows, 0, ld);
      delta_rows_[r] += small_cache_kernels::dot(panel.data() + r * ld, b_rows.data(), cols);
    }
  }
  float finish(int64_t r, float sum, float p) const { return p * (sum - delta_rows_[r]); }
  void end_block(FastMemory& /*fast*/, const BlockWalker& /*walker*/) {}

 private:
  SlowMatrix<const float> o_;
  FastBuffer<float> delta_rows_;  // (block_rows)
};

struct Identity {
  void begin_block(FastMemory& /*fast*/, const BlockWalker& /*walker*/) {}
  float transform(int64_t /*r*/, float value) const { return value; }
};

HeadShape check_backward(const HeadBackward& head, const SparseSmallCacheMask& mask) {
  const HeadShape shape{head.q.rows(), head.k.rows(), head.q.cols(), head.v.cols()};
  const char* where = "sparse_small_cache_backward";
  const auto expect = [&](const char* name, int64_t rows, int64_t cols, int64_t want_rows,
                          int64_t want_cols, const char* meaning) {
    if (rows != want_rows || cols != want_cols) {
      fail(where, ": ", name, " is ", rows, " x ", cols, ", expected ", want_rows, " x ", want_cols,
           " (", meaning, ")");
    }
  };
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  expect("k", head.k.rows(), head.k.cols(), n, d, "seqlen_k x head_dim of q");
  expect("v", head.v.rows(), head.v.cols(), n, e, "seqlen_k x head_dim_v");
  expect("o", head.o.rows(), head.o.cols(), m, e, "seqlen_q x head_dim_v");
  expect("lse", head.lse.rows(), head.lse.cols(), m, 1, "seqlen_q x 1");
  expect("d_o", head.d_o.rows(), head.d_o.cols(), m, e, "seqlen_q x head_dim_v");
  expect("dq", head.dq.rows(), head.dq.cols(), m, d, "seqlen_q x head_dim");
  expect("dk", head.dk.rows(), head.dk.cols(), n, d, "seqlen_k x head_dim");
  expect("dv", head.dv.rows(), head.dv.cols(), n, e, "seqlen_k x head_dim_v");
  if (mask.seqlen_q() != m || mask.seqlen_k() != n) {
    fail(where, ": the mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", q and k have ", m,
         " and ", n, " rows");
  }
  return shape;
}

}  // namespace

namespace {

void backward_on(const Memories& memories, const HeadBackward& head, const SparseSmallCacheMask& mask,
                 const SparseSmallCacheTiles& tiles) {
  const HeadShape shape = check_backward(head, mask);
  check_tiles("sparse_small_cache_backward", shape, mask, tiles, Pass::backward);
  for (const FastMemory* fast : memories) check_room("sparse_small_cache_backward", *fast, tiles);
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int64_t nnz = mask.nnz();
  const auto workers = static_cast<int64_t>(memories.size());

  const WalkStructure rows{m,
                           n,
                           SlowMatrix<const int64_t>::dense(mask.row_ptr().data(), m + 1, 1),
                           SlowMatrix<const int64_t>::dense(mask.col_idx().data(), nnz, 1),
                           SlowMatrix<const int64_t>(),
                           false};
  const WalkStructure keys{n,
                           m,
                           SlowMatrix<const int64_t>::dense(mask.col_ptr().data(), n + 1, 1),
                           SlowMatrix<const int64_t>::dense(mask.row_idx().data(), nnz, 1),
                           SlowMatrix<const int64_t>::dense(mask.csr_position().data(), nnz, 1),
                           true};
  // Slow-memory scratch for P and dS at the mask's entries, CSR order, owned by this call, starting
  // on a line as the line model takes them to.
  LineAlignedArray<float> p_storage(static_cast<size_t>(nnz)), ds_storage(static_cast<size_t>(nnz));
  const auto p = SlowMatrix<float>::dense(p_storage.data(), nnz, 1);
  const auto p_read = SlowMatrix<const float>::dense(p_storage.data(), nnz, 1);
  const auto ds = SlowMatrix<float>::dense(ds_storage.data(), nnz, 1);

  // Each sweep reads what the one before wrote: the workers meet between sweeps.
  run_on(memories, [&](FastMemory& fast, int worker) {
    Probabilities hooks(fast, head.lse, head.scale, tiles.probs.block_rows);
    sddmm_sweep(fast, rows, shape.head_dim, tiles.probs,
                {Operand::q, head.q, Operand::k, head.k, p, Operand::s, Operand::p}, hooks,
                {worker, workers});
  });
  run_on(memories, [&](FastMemory& fast, int worker) {
    ScoreGradient hooks(fast, head.o, tiles.d_scores.block_rows);
    sddmm_sweep(fast, rows, shape.head_dim_v, tiles.d_scores,
                {Operand::d_o, head.d_o, Operand::v, head.v, ds, Operand::dp, Operand::ds, Operand::p, p_read},
                hooks,
                {worker, workers});
  });
  // dQ (rows), dK and dV (keys) write disjoint outputs from what is now final: one meeting.
  run_on(memories, [&](FastMemory& fast, int worker) {
    Identity identity;
    const BlockShare share{worker, workers};
    spmm_sweep(fast, rows, shape.head_dim, tiles.dq,
               {Operand::ds, ds, Operand::k, head.k, Operand::dq, head.dq, head.scale}, identity, share);
    spmm_sweep(fast, keys, shape.head_dim, tiles.dk,
               {Operand::ds, ds, Operand::q, head.q, Operand::dk, head.dk, head.scale}, identity, share);
    spmm_sweep(fast, keys, shape.head_dim_v, tiles.dv,
               {Operand::p, p, Operand::d_o, head.d_o, Operand::dv, head.dv, 1.0f}, identity, share);
  });
}

}  // namespace

void sparse_small_cache_backward(FastMemory& fast, const HeadBackward& head,
                                 const SparseSmallCacheMask& mask,
                                 const SparseSmallCacheTiles& tiles) {
  backward_on({&fast}, head, mask, tiles);
}

void sparse_small_cache_backward(cpu::WorkerMemories& workers, const HeadBackward& head,
                                 const SparseSmallCacheMask& mask, const SparseSmallCacheTiles& tiles) {
  backward_on(memories_of(workers), head, mask, tiles);
}

}  // namespace spattn::schedules
