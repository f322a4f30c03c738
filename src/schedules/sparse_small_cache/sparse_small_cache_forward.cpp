// The density-adaptive small-cache forward (sparse_small_cache.hpp; docs/sparse_small_cache.md):
//   S = scale Q K^T at the mask      SDDMM sweep; LSE from running row statistics
//   O = exp(S - LSE) V               SpMM sweep; P made from S as it is loaded, never written
#include "cpu/kernels/scalar_exp.hpp"
#include "schedules/common/line_aligned_array.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"
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

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// On the finished scores of a row block: each row's running max and sum of exp(S - max) (the
// online softmax, one entry at a time), and LSE = max + log(sum) written for every row of the
// block at its end (-inf for a row without entries). Saves a pass over S. Its exp and
// SoftmaxOnLoad's are scalar_exp: its constants take one line, expf's about five.
class RowStatistics {
 public:
  RowStatistics(FastMemory& fast, SlowMatrix<float> lse, float scale, int64_t block_rows)
      : lse_(lse),
        scale_(scale),
        stats_(fast.allocate<float>(2 * block_rows, "sparse_small_cache row max and sum")),
        row_max_(stats_.data()),
        row_sum_(row_max_ + block_rows) {}

  void begin_block(FastMemory& /*fast*/, const BlockWalker& walker) {
    std::fill(row_max_, row_max_ + walker.rows(), kMinusInfinity);
    std::fill(row_sum_, row_sum_ + walker.rows(), 0.0f);
  }
  void begin_chunk(FastMemory& /*fast*/, const BlockWalker& /*walker*/, int64_t /*col0*/,
                   int64_t /*cols*/, const FastBuffer<float>& /*panel*/, int64_t /*ld*/,
                   FastBuffer<float>& /*b_rows*/) {}
  float finish(int64_t r, float sum, float /*companion*/) {
    const float s = scale_ * sum;
    // row_max_ is -inf only before the row's first entry, where the sum is 0.
    if (s > row_max_[r]) {
      row_sum_[r] = row_sum_[r] * scalar_exp(row_max_[r] - s) + 1.0f;
      row_max_[r] = s;
    } else {
      row_sum_[r] += scalar_exp(s - row_max_[r]);
    }
    return s;
  }
  void end_block(FastMemory& fast, const BlockWalker& walker) {
    for (int64_t r = 0; r < walker.rows(); ++r) {
      row_max_[r] = row_sum_[r] > 0.0f ? row_max_[r] + std::log(row_sum_[r]) : kMinusInfinity;
    }
    fast.store(Operand::lse, stats_, 0, 1, lse_, walker.row0(), 0, walker.rows(), 1);  // row_max_
  }

 private:
  SlowMatrix<float> lse_;
  float scale_;
  // Both in one buffer, so that a block of a few rows keeps them in one line, not two.
  FastBuffer<float> stats_;
  float* row_max_;  // (block_rows), at the start of stats_
  float* row_sum_;  // (block_rows)
};

// On O = P V: P = exp(S - LSE) as each S word is loaded; LSE loaded once per row block, for the
// rows with entries only (the others never need it).
class SoftmaxOnLoad {
 public:
  SoftmaxOnLoad(FastMemory& fast, SlowMatrix<float> lse, int64_t block_rows)
      : lse_(lse), lse_rows_(fast.allocate<float>(block_rows, "sparse_small_cache LSE rows")) {}

  void begin_block(FastMemory& fast, const BlockWalker& walker) {
    for (int64_t r = 0; r < walker.rows(); ++r) {
      if (walker.nonempty(r))
        fast.load(Operand::lse, lse_, walker.row0() + r, 0, 1, 1, lse_rows_, r, 1);
    }
  }
  float transform(int64_t r, float s) const { return scalar_exp(s - lse_rows_[r]); }

 private:
  SlowMatrix<float> lse_;
  FastBuffer<float> lse_rows_;  // (block_rows)
};

HeadShape check_forward(const HeadForward& head, const SparseSmallCacheMask& mask) {
  const HeadShape shape{head.q.rows(), head.k.rows(), head.q.cols(), head.v.cols()};
  if (head.k.cols() != shape.head_dim) {
    fail("sparse_small_cache_forward: k has head_dim ", head.k.cols(), ", q has ", shape.head_dim);
  }
  if (head.v.rows() != shape.seqlen_k) {
    fail("sparse_small_cache_forward: v has ", head.v.rows(), " rows, k has ", shape.seqlen_k);
  }
  if (head.o.rows() != shape.seqlen_q || head.o.cols() != shape.head_dim_v) {
    fail("sparse_small_cache_forward: o is ", head.o.rows(), " x ", head.o.cols(), ", expected ",
         shape.seqlen_q, " x ", shape.head_dim_v, " (seqlen_q x head_dim_v)");
  }
  if (head.lse.rows() != shape.seqlen_q || head.lse.cols() != 1) {
    fail("sparse_small_cache_forward: lse is ", head.lse.rows(), " x ", head.lse.cols(),
         ", expected ", shape.seqlen_q, " x 1");
  }
  if (mask.seqlen_q() != shape.seqlen_q || mask.seqlen_k() != shape.seqlen_k) {
    fail("sparse_small_cache_forward: the mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(),
         ", q and k have ", shape.seqlen_q, " and ", shape.seqlen_k, " rows");
  }
  return shape;
}

}  // namespace

namespace {

void forward_on(const Memories& memories, const HeadForward& head, const SparseSmallCacheMask& mask,
                const SparseSmallCacheTiles& tiles) {
  const HeadShape shape = check_forward(head, mask);
  check_tiles("sparse_small_cache_forward", shape, mask, tiles, Pass::forward);
  for (const FastMemory* fast : memories) check_room("sparse_small_cache_forward", *fast, tiles);
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
  // Slow-memory scratch for S at the mask's entries, CSR order, owned by this call, starting on a
  // line as the line model takes it to.
  LineAlignedArray<float> s_storage(static_cast<size_t>(nnz));
  const auto s = SlowMatrix<float>::dense(s_storage.data(), nnz, 1);

  run_on(memories, [&](FastMemory& fast, int worker) {
    RowStatistics hooks(fast, head.lse, head.scale, tiles.scores.block_rows);
    sddmm_sweep(fast, rows, shape.head_dim, tiles.scores,
                {Operand::q, head.q, Operand::k, head.k, s, Operand::s, Operand::s}, hooks,
                {worker, workers});
  });
  run_on(memories, [&](FastMemory& fast, int worker) {
    SoftmaxOnLoad hooks(fast, head.lse, tiles.output.block_rows);
    spmm_sweep(fast, rows, shape.head_dim_v, tiles.output,
               {Operand::s, s, Operand::v, head.v, Operand::o, head.o, 1.0f}, hooks, {worker, workers});
  });
}

}  // namespace

void sparse_small_cache_forward(FastMemory& fast, const HeadForward& head,
                                const SparseSmallCacheMask& mask,
                                const SparseSmallCacheTiles& tiles) {
  forward_on({&fast}, head, mask, tiles);
}

void sparse_small_cache_forward(cpu::WorkerMemories& workers, const HeadForward& head,
                                const SparseSmallCacheMask& mask, const SparseSmallCacheTiles& tiles) {
  forward_on(memories_of(workers), head, mask, tiles);
}

}  // namespace spattn::schedules
