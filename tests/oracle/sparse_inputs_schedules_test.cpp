// Sparse (CSR) Q, K, V through every schedule: dense and block-sparse flash, dense and
// density-adaptive small_cache, forward and backward, over several masks and odd sizes. Each run
// with CSR inputs must give bit for bit the outputs of the run on the densified inputs (the loads
// scatter into the same fast buffers), agree with the fp64 reference, and move exactly the
// predicted words: values and index words apart, and per input operand the reads
// input_traffic.hpp predicts (for the dense run too, which checks the mirrors of the loads).
#include "plan/dense_small_cache_tiles.hpp"
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/csr_inputs/input_traffic.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"
#include "plan/sparse_small_cache_tile_choice.hpp"

#include "support/compare.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/test_helpers.hpp"

#include <spattn/reference.hpp>

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::TensorView;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::io::Operand;
using spattn::io::WordKind;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;
using spattn::testing::SparseInput;
using spattn::testing::expect_same_bits;
using spattn::testing::sparse_input;
namespace reference = spattn::reference;
using Pattern = sparse_formats::CsrPattern<int64_t>;

enum class Algorithm { flash, small_cache };
const char* name(Algorithm a) { return a == Algorithm::flash ? "flash" : "small_cache"; }

// The outputs of one run.
struct Outputs {
  std::vector<float> o, lse, delta, dq, dk, dv;
};

// One head with CSR inputs and their densified copies, a mask, and the schedule's structures.
class Case {
 public:
  Case(const HeadShape& shape, const std::string& spec, double density)
      : shape_(shape), full_(spec == "full") {
    const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
    // Row 1 of Q is empty (a query with no features), the last row of K all zero.
    q_ = sparse_input(m, d, density, 11, 1, 3.0f);
    k_ = sparse_input(n, d, density, 12, n - 1);
    v_ = sparse_input(n, e, density, 13);
    d_o_ = spattn::testing::random_floats(m * e, 14);
    scale_ = d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
    mask_ = sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(spec), m, n);
    if (!full_) sparse_mask_ = std::make_unique<SparseSmallCacheMask>(mask_.view());
  }

  const HeadShape& shape() const { return shape_; }
  int64_t input_nnz() const { return q_.csr.nnz() + k_.csr.nnz() + v_.csr.nnz(); }

  reference::ForwardResult reference_forward() const {
    const auto q = dense(q_, shape_.head_dim), k = dense(k_, shape_.head_dim), v = dense(v_, shape_.head_dim_v);
    return reference::forward<int64_t>(view(q, shape_.seqlen_q), view(k, shape_.seqlen_k), view(v, shape_.seqlen_k),
                                       {mask_.view()}, scale_);
  }
  reference::BackwardResult reference_backward() const {
    const auto q = dense(q_, shape_.head_dim), k = dense(k_, shape_.head_dim), v = dense(v_, shape_.head_dim_v);
    const std::vector<double> d_o(d_o_.begin(), d_o_.end());
    return reference::backward<int64_t>(view(q, shape_.seqlen_q), view(k, shape_.seqlen_k),
                                        view(v, shape_.seqlen_k), view(d_o, shape_.seqlen_q), {mask_.view()},
                                        scale_);
  }

  // Runs the algorithm's forward, then its backward on that forward's O and LSE, with CSR inputs
  // (csr) or the densified ones; checks counted == predicted and the per-operand input reads.
  Outputs run(Algorithm algorithm, int64_t cache_words, bool csr) {
    Outputs out;
    const int64_t m = shape_.seqlen_q, n = shape_.seqlen_k, d = shape_.head_dim, e = shape_.head_dim_v;
    out.o.assign(static_cast<size_t>(m * e), 7.0f);
    out.lse.assign(static_cast<size_t>(m), 7.0f);
    out.delta.assign(static_cast<size_t>(m), 0.0f);
    out.dq.assign(static_cast<size_t>(m * d), 7.0f);
    out.dk.assign(static_cast<size_t>(n * d), 7.0f);
    out.dv.assign(static_cast<size_t>(n * e), 7.0f);
    const auto q = input(q_, csr), k = input(k_, csr), v = input(v_, csr);
    const HeadForward forward{q, k, v, SlowMatrix<float>::dense(out.o.data(), m, e),
                              SlowMatrix<float>::dense(out.lse.data(), m, 1), scale_};
    run_pass(algorithm, Pass::forward, cache_words, forward);
    const HeadBackward backward{q, k, v,
                                SlowMatrix<const float>::dense(out.o.data(), m, e),
                                SlowMatrix<const float>::dense(out.lse.data(), m, 1),
                                SlowMatrix<const float>::dense(d_o_.data(), m, e),
                                SlowMatrix<float>::dense(out.delta.data(), m, 1),
                                SlowMatrix<float>::dense(out.dq.data(), m, d),
                                SlowMatrix<float>::dense(out.dk.data(), n, d),
                                SlowMatrix<float>::dense(out.dv.data(), n, e),
                                scale_};
    run_pass(algorithm, Pass::backward, cache_words, backward);
    return out;
  }

 private:
  SlowMatrix<const float> input(const SparseInput& x, bool csr) const {
    if (csr) return SlowMatrix<const float>::csr(x.csr.view());
    return SlowMatrix<const float>::dense(x.dense.data(), x.csr.num_rows(), x.csr.num_cols());
  }
  static std::vector<double> dense(const SparseInput& x, int64_t) { return {x.dense.begin(), x.dense.end()}; }
  TensorView<const double> view(const std::vector<double>& x, int64_t rows) const {
    const int64_t cols = rows > 0 ? static_cast<int64_t>(x.size()) / rows : 0;
    return TensorView<const double>::matrix(x.data(), rows, cols);
  }

  template <typename Problem>
  void run_pass(Algorithm algorithm, Pass pass, int64_t cache_words, const Problem& problem) {
    constexpr bool forward = std::is_same_v<Problem, HeadForward>;
    SCOPED_TRACE(std::string(name(algorithm)) + " " + pass_name(pass));
    Ledger ledger;
    FastMemory fast(cache_words, &ledger, name(algorithm));
    const HeadInputs inputs = HeadInputs::of(problem, ledger.line_words());
    InputIo io;
    InputTraffic reads;
    if (algorithm == Algorithm::flash) {
      const auto masking = full_ ? FlashMasking::dense : FlashMasking::block_sparse;
      const FlashTiles tiles = flash_tiles(shape_, cache_words, pass, masking);
      std::optional<FlashMask> mask;
      if (!full_) mask = build_flash_mask(mask_.view(), shape_.seqlen_q, shape_.seqlen_k, tiles, pass);
      const FlashMask* mask_ptr = mask ? &*mask : nullptr;
      if constexpr (forward) {
        flash_forward(fast, problem, tiles, mask_ptr);
        reads = flash_forward_inputs(shape_, tiles, mask_ptr, inputs);
      } else {
        flash_backward(fast, problem, tiles, mask_ptr);
        reads = flash_backward_inputs(shape_, tiles, mask_ptr, inputs);
      }
      io = predict_flash_with_inputs(shape_, tiles, mask_ptr, pass, inputs);
    } else if (full_) {
      const SmallCacheTiles tiles = small_cache_tiles(shape_, cache_words, pass);
      if constexpr (forward) {
        small_cache_forward(fast, problem, tiles);
        reads = small_cache_forward_inputs(shape_, tiles, inputs);
      } else {
        small_cache_backward(fast, problem, tiles);
        reads = small_cache_backward_inputs(shape_, tiles, inputs);
      }
      io = predict_small_cache_with_inputs(shape_, tiles, inputs);
    } else {
      const SparseSmallCacheTiles tiles = sparse_small_cache_tiles(shape_, *sparse_mask_, cache_words, pass);
      if constexpr (forward) {
        sparse_small_cache_forward(fast, problem, *sparse_mask_, tiles);
        reads = sparse_small_cache_forward_inputs(shape_, *sparse_mask_, tiles, inputs);
      } else {
        sparse_small_cache_backward(fast, problem, *sparse_mask_, tiles);
        reads = sparse_small_cache_backward_inputs(shape_, *sparse_mask_, tiles, inputs);
      }
      io = predict_sparse_small_cache_with_inputs(shape_, *sparse_mask_, tiles, inputs);
    }
    const SparseIo& predicted = io.words;
    const SparseIo& predicted_lines = io.lines;
    // counted == predicted, value and index words apart, reads and writes apart.
    EXPECT_EQ(ledger.total(WordKind::value).reads, predicted.values.reads);
    EXPECT_EQ(ledger.total(WordKind::value).writes, predicted.values.writes);
    EXPECT_EQ(ledger.total(WordKind::index).reads, predicted.indices.reads);
    EXPECT_EQ(ledger.total(WordKind::index).writes, predicted.indices.writes);
    // The same in lines of 16 words.
    EXPECT_EQ(ledger.total_lines(WordKind::value).reads, predicted_lines.values.reads);
    EXPECT_EQ(ledger.total_lines(WordKind::value).writes, predicted_lines.values.writes);
    EXPECT_EQ(ledger.total_lines(WordKind::index).reads, predicted_lines.indices.reads);
    EXPECT_EQ(ledger.total_lines(WordKind::index).writes, predicted_lines.indices.writes);
    // Each input's reads, values and indices (all zero indices for a dense input), words and lines.
    const auto expect_reads = [&](Operand operand, const spattn::io::CsrTileWords& words) {
      EXPECT_EQ(ledger.traffic(operand, WordKind::value).reads, words.values) << spattn::io::operand_name(operand);
      EXPECT_EQ(ledger.traffic(operand, WordKind::index).reads, words.indices) << spattn::io::operand_name(operand);
      EXPECT_EQ(ledger.lines(operand, WordKind::value).reads, words.value_lines) << spattn::io::operand_name(operand);
      EXPECT_EQ(ledger.lines(operand, WordKind::index).reads, words.index_lines) << spattn::io::operand_name(operand);
    };
    expect_reads(Operand::q, reads.q);
    expect_reads(Operand::k, reads.k);
    expect_reads(Operand::v, reads.v);
    EXPECT_LE(ledger.peak_resident(), cache_words);
  }

  HeadShape shape_;
  bool full_;
  SparseInput q_, k_, v_;
  std::vector<float> d_o_;
  float scale_ = 1.0f;
  Pattern mask_;
  std::unique_ptr<SparseSmallCacheMask> sparse_mask_;
};

// The M values tried: the smallest each algorithm runs with for this mask, and a larger one.
std::vector<int64_t> caches_for(Algorithm algorithm, const HeadShape& shape, bool full) {
  if (algorithm == Algorithm::flash) {
    const auto masking = full ? FlashMasking::dense : FlashMasking::block_sparse;
    const int64_t both = std::max(flash_min_cache_words(shape, Pass::forward, masking),
                                  flash_min_cache_words(shape, Pass::backward, masking));
    return {both, both * 6};
  }
  // Tiny M: 1-wide chunks of the head dimension (every CSR load searches its rows); then wider.
  const int64_t sparse_minimum = std::max(sparse_small_cache_min_cache_words(Pass::forward),
                                          sparse_small_cache_min_cache_words(Pass::backward));
  return {full ? 5 : sparse_minimum, 40, 300};
}

void check_case(const HeadShape& shape, const std::string& spec, double density) {
  Case c(shape, spec, density);
  const auto fwd = c.reference_forward();
  const auto bwd = c.reference_backward();
  const int64_t m = shape.seqlen_q, n = shape.seqlen_k, d = shape.head_dim, e = shape.head_dim_v;
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
    for (int64_t cache_words : caches_for(algorithm, shape, spec == "full")) {
      SCOPED_TRACE(::testing::Message() << spec << " seqlen_q " << m << " seqlen_k " << n << " d " << d
                                        << " e " << e << " density " << density << " " << name(algorithm)
                                        << " M " << cache_words);
      const Outputs sparse = c.run(algorithm, cache_words, true);
      const Outputs dense = c.run(algorithm, cache_words, false);
      expect_same_bits(sparse.o, dense.o, "o");
      expect_same_bits(sparse.lse, dense.lse, "lse");
      expect_same_bits(sparse.dq, dense.dq, "dq");
      expect_same_bits(sparse.dk, dense.dk, "dk");
      expect_same_bits(sparse.dv, dense.dv, "dv");
      EXPECT_LE(max_abs_error(sparse.o, fwd.o), fp32_tolerance(d + n, max_abs(fwd.o)));
      EXPECT_LE(max_abs_error(sparse.lse, fwd.lse), fp32_tolerance(d + n, max_abs(fwd.lse)));
      const int64_t terms = d + e + m + n;
      EXPECT_LE(max_abs_error(sparse.dq, bwd.dq), fp32_tolerance(terms, max_abs(bwd.dq)));
      EXPECT_LE(max_abs_error(sparse.dk, bwd.dk), fp32_tolerance(terms, max_abs(bwd.dk)));
      EXPECT_LE(max_abs_error(sparse.dv, bwd.dv), fp32_tolerance(terms, max_abs(bwd.dv)));
    }
  }
}

const char* const kMasks[] = {"full", "causal", "sliding_window:w=3", "random:p=0.3,seed=5"};

TEST(SparseInputsSchedules, OddSizesEveryMaskBothAlgorithmsBothPasses) {
  for (const int64_t n : {1, 7, 97}) {
    for (const char* spec : kMasks) check_case({n, n, 8, 5}, spec, 0.4);
  }
}

// Every pattern of the library (its default parameters) on a rectangular shape that is not a
// multiple of any tile: CSR inputs change only what is loaded, so each must still match.
TEST(SparseInputsSchedules, EveryPatternOfTheLibrary) {
  for (const auto& info : sparse_formats::list_patterns()) check_case({97, 61, 8, 5}, info.name, 0.4);
}

TEST(SparseInputsSchedules, LongerSequence) {
  if (spattn::testing::kSanitized) GTEST_SKIP() << "n = 257 is covered by the Release run";
  for (const char* spec : {"causal", "random:p=0.05,seed=9"}) check_case({257, 257, 16, 16}, spec, 0.25);
}

TEST(SparseInputsSchedules, OneByOneAndRectangular) {
  for (const char* spec : kMasks) {
    check_case({1, 1, 1, 1}, spec, 1.0);
    check_case({7, 13, 6, 9}, spec, 0.3);
  }
}

// Tiles whose chunks of the head dimension carry a line to the next (tiled_matmul.hpp): Q's and
// K's dense chunks after the first load continued, their CSR chunks without a carry; each run
// counts what its prediction says (Case::run_pass) and both give the same bits.
TEST(SparseInputsSchedules, ChunksThatCarryALine) {
  const HeadShape shape{97, 97, 24, 24};
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    const SmallCacheTiles tiles = small_cache_tiles(shape, 800, pass);
    ASSERT_TRUE(tiles.scores.carry_a && tiles.scores.carry_b) << pass_name(pass);
  }
  Case c(shape, "full", 0.4);
  const Outputs sparse = c.run(Algorithm::small_cache, 800, true);
  const Outputs dense = c.run(Algorithm::small_cache, 800, false);
  expect_same_bits(sparse.o, dense.o, "o");
  expect_same_bits(sparse.dq, dense.dq, "dq");
  expect_same_bits(sparse.dk, dense.dk, "dk");
}

TEST(SparseInputsSchedules, VerySparseAndDenseInputs) {
  for (const double density : {0.05, 1.0}) {
    for (const char* spec : {"full", "random:p=0.2,seed=3"}) check_case({33, 41, 16, 16}, spec, density);
  }
}

// The outputs are not trivial: the reference on these inputs has nonzero O and gradients, and an
// empty Q row gives that row uniform attention (all scores 0), not an empty row.
TEST(SparseInputsSchedules, OutputsAreNonTrivial) {
  Case c({7, 7, 8, 5}, "causal", 0.4);
  const auto fwd = c.reference_forward();
  const auto bwd = c.reference_backward();
  EXPECT_GT(max_abs(fwd.o), 0.1);
  EXPECT_GT(max_abs(bwd.dq), 1e-3);
  EXPECT_GT(max_abs(bwd.dk), 1e-3);
  EXPECT_GT(max_abs(bwd.dv), 1e-3);
  EXPECT_TRUE(std::isfinite(fwd.lse[1]));
  EXPECT_GT(c.input_nnz(), 0);
}

}  // namespace
