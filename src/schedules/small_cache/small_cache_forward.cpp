// The small-cache forward (small_cache.hpp; docs/small_cache.md):
//   S = scale Q K^T          tiled; S written, LSE from running row statistics
//   O = exp(S - LSE) V       tiled; P made from S as it is loaded, never written
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

// On S = scale Q K^T: keeps each row's running max and sum of exp(S - max) over the row block's
// output tiles (the online softmax of FlashAttention, one tile at a time), and writes
// LSE = max + log(sum) when the row block is done. Saves a pass over S in slow memory.
class RowStatisticsHooks final : public MatmulHooks {
 public:
  RowStatisticsHooks(FastMemory& fast, SlowMatrix<float> lse, int64_t tile_m)
      : lse_(lse),
        row_max_(fast.allocate<float>(tile_m, "small_cache row max")),  // (tile_m)
        row_sum_(fast.allocate<float>(tile_m, "small_cache row sum")) {}  // (tile_m)
  static_assert(kForwardScoresRowWords == 2, "row max and row sum");

  void begin_row_block(FastMemory& /*fast*/, int64_t /*row0*/, int64_t rows) override {
    std::fill(row_max_.data(), row_max_.data() + rows, -std::numeric_limits<float>::infinity());
    std::fill(row_sum_.data(), row_sum_.data() + rows, 0.0f);
  }

  void finish_tile(FastMemory& /*fast*/, int64_t /*row0*/, int64_t /*col0*/, int64_t rows,
                   int64_t cols, float* tile, int64_t ld, FastBuffer<float>& /*scratch*/) override {
    small_cache_kernels::update_row_statistics(tile, rows, cols, ld, row_max_.data(),
                                               row_sum_.data());
  }

  void end_row_block(FastMemory& fast, int64_t row0, int64_t rows) override {
    // A row with no keys (seqlen_k == 0) has sum 0: LSE = -inf.
    for (int64_t r = 0; r < rows; ++r) {
      row_max_[r] = row_sum_[r] > 0.0f ? row_max_[r] + std::log(row_sum_[r])
                                       : -std::numeric_limits<float>::infinity();
    }
    fast.store(Operand::lse, row_max_, 0, 1, lse_, row0, 0, rows, 1);
  }

 private:
  SlowMatrix<float> lse_;
  FastBuffer<float> row_max_;
  FastBuffer<float> row_sum_;
};

// On O = P V: turns each loaded chunk of S into P = exp(S - LSE), LSE loaded once per row block.
class SoftmaxOnLoadHooks final : public MatmulHooks {
 public:
  SoftmaxOnLoadHooks(FastMemory& fast, SlowMatrix<float> lse, int64_t tile_m)
      : lse_(lse), lse_rows_(fast.allocate<float>(tile_m, "small_cache LSE rows")) {}  // (tile_m)
  static_assert(kForwardOutputRowWords == 1, "LSE");

  void begin_row_block(FastMemory& fast, int64_t row0, int64_t rows) override {
    fast.load(Operand::lse, lse_, row0, 0, rows, 1, lse_rows_, 0, 1);
  }

  void transform_a(int64_t /*row0*/, int64_t /*col0*/, int64_t rows, int64_t cols, float* chunk,
                   int64_t ld) override {
    // The chunk's rows are the row block's rows (tiled_matmul loads A by row block).
    small_cache_kernels::exp_shifted_rows(chunk, rows, cols, ld, lse_rows_.data());
  }

 private:
  SlowMatrix<float> lse_;
  FastBuffer<float> lse_rows_;
};

HeadShape check_forward(const HeadForward& head) {
  const HeadShape shape{head.q.rows(), head.k.rows(), head.q.cols(), head.v.cols()};
  if (head.k.cols() != shape.head_dim) {
    fail("small_cache_forward: k has head_dim ", head.k.cols(), ", q has ", shape.head_dim);
  }
  if (head.v.rows() != shape.seqlen_k) {
    fail("small_cache_forward: v has ", head.v.rows(), " rows, k has ", shape.seqlen_k);
  }
  if (head.o.rows() != shape.seqlen_q || head.o.cols() != shape.head_dim_v) {
    fail("small_cache_forward: o is ", head.o.rows(), " x ", head.o.cols(), ", expected ",
         shape.seqlen_q, " x ", shape.head_dim_v, " (seqlen_q x head_dim_v)");
  }
  if (head.lse.rows() != shape.seqlen_q || head.lse.cols() != 1) {
    fail("small_cache_forward: lse is ", head.lse.rows(), " x ", head.lse.cols(), ", expected ",
         shape.seqlen_q, " x 1");
  }
  return shape;
}

}  // namespace

namespace {

void forward_on(const Memories& memories, const HeadForward& head, const SmallCacheTiles& tiles) {
  const HeadShape shape = check_forward(head);
  check_tiles("small_cache_forward", shape, tiles, Pass::forward);
  for (const FastMemory* fast : memories) check_room("small_cache_forward", *fast, tiles);
  const int64_t m = shape.seqlen_q;
  const int64_t n = shape.seqlen_k;
  const int workers = static_cast<int>(memories.size());

  // Slow-memory scratch for S (seqlen_q, seqlen_k), owned by this call.
  LineAlignedArray<float> s_storage(static_cast<size_t>(m * n));
  const auto s = SlowMatrix<float>::dense(s_storage.data(), m, n);
  const auto s_in = SlowMatrix<const float>::dense(s_storage.data(), m, n);

  run_on(memories, [&](FastMemory& fast, int worker) {
    RowStatisticsHooks hooks(fast, head.lse, tiles.scores.tile_m);
    tiled_matmul(fast, {Operand::q, head.q}, {Operand::k, head.k.transposed()}, {Operand::s, s},
                 tiles.scores, share({head.scale, false, &hooks}, worker, workers));
  });
  run_on(memories, [&](FastMemory& fast, int worker) {
    SoftmaxOnLoadHooks hooks(fast, head.lse, tiles.output.tile_m);
    tiled_matmul(fast, {Operand::s, s_in}, {Operand::v, head.v}, {Operand::o, head.o},
                 tiles.output, share({1.0f, false, &hooks}, worker, workers));
  });
}

}  // namespace

void small_cache_forward(FastMemory& fast, const HeadForward& head, const SmallCacheTiles& tiles) {
  forward_on({&fast}, head, tiles);
}

void small_cache_forward(cpu::WorkerMemories& workers, const HeadForward& head,
                         const SmallCacheTiles& tiles) {
  forward_on(memories_of(workers), head, tiles);
}

}  // namespace spattn::schedules
