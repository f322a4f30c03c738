// The CUDA backend's host-side logic, run on the CPU (no GPU needed): the __host__ __device__ tile
// math of src/schedules/common/tile_math.hpp (the kernels' index arithmetic, online softmax and gradient
// rules), the tiles chosen for a shared-memory budget and the kernels' shared-memory layouts, the
// device tile lists (walked exactly as the kernels walk them, reproducing every mask of the
// library). What the backend does to its inputs on the host: cuda_inputs_test.cpp.
#include "plan/dense_flash_tiles.hpp"
#include "device/device_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/tile_math.hpp"

#include "cuda_support.hpp"

#include <spattn/cuda.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace spattn::tile_math;
using spattn::Mask;
using spattn::Pass;
using spattn::schedules::FlashMasking;
using spattn::schedules::FlashTiles;
using spattn::schedules::HeadShape;
using ::testing::HasSubstr;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

TEST(CudaTileMath, TileCountsRowsAndHeads) {
  EXPECT_EQ(num_tiles(0, 16), 0);
  EXPECT_EQ(num_tiles(1, 16), 1);
  EXPECT_EQ(num_tiles(97, 16), 7);
  EXPECT_EQ(num_tiles(96, 16), 6);
  EXPECT_EQ(tile_rows(97, 16, 0), 16);
  EXPECT_EQ(tile_rows(97, 16, 6), 1);
  EXPECT_EQ(tile_rows(1, 16, 0), 1);
  EXPECT_EQ(kv_head_of(5, 8, 2), 1);   // groups of 4: heads 4..7 -> kv head 1
  EXPECT_EQ(kv_head_of(3, 8, 2), 0);
  EXPECT_EQ(kv_head_of(7, 8, 8), 7);
  EXPECT_EQ(kv_head_of(7, 8, 1), 0);
  EXPECT_EQ(entry_tile(2 * 9 + 1), 9);
  EXPECT_TRUE(entry_partial(2 * 9 + 1));
  EXPECT_FALSE(entry_partial(2 * 9));
  const uint64_t bits[2] = {uint64_t{1} << 63, 1u};  // bits 63 and 64
  EXPECT_TRUE(element_attends(bits, 8, 7, 7));     // bit 7 * 8 + 7 = 63
  EXPECT_TRUE(element_attends(bits, 8, 8, 0));     // bit 64
  EXPECT_FALSE(element_attends(bits, 8, 0, 0));
  EXPECT_TRUE(element_attends(nullptr, 8, 3, 3));  // a full tile
}

// The kernels' online softmax (one row, its key tiles in order, scores -inf where masked) against
// the direct fp64 softmax, for several tile widths, a row whose first tiles are all masked, and a
// row that attends nothing.
TEST(CudaTileMath, OnlineSoftmaxMatchesTheDirectSoftmax) {
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> uniform(-6.0f, 6.0f);
  const int64_t n = 97;
  for (const int pattern : {0, 1, 2}) {
    std::vector<float> s(n), v(n);
    for (int64_t j = 0; j < n; ++j) {
      s[j] = uniform(engine);
      v[j] = uniform(engine) / 6.0f;
      if (pattern == 1 && (j < 40 || j % 3 == 0)) s[j] = kNegInf;  // masked prefix and holes
      if (pattern == 2) s[j] = kNegInf;                             // nothing attended
    }
    double m = -INFINITY, l = 0.0, acc = 0.0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, static_cast<double>(s[j]));
    for (int64_t j = 0; j < n; ++j) {
      if (s[j] == kNegInf) continue;
      l += std::exp(s[j] - m);
      acc += std::exp(s[j] - m) * v[j];
    }
    const double lse = l > 0 ? m + std::log(l) : -INFINITY;
    const double out = l > 0 ? acc / l : 0.0;
    for (const int64_t block : {1, 5, 16, 97}) {
      SCOPED_TRACE("pattern " + std::to_string(pattern) + ", block " + std::to_string(block));
      float row_max = kNegInf, row_sum = 0.0f, row_acc = 0.0f;
      for (int64_t t = 0; t < num_tiles(n, block); ++t) {
        const int64_t c0 = t * block, rows = tile_rows(n, block, t);
        float block_max = kNegInf;
        for (int64_t c = 0; c < rows; ++c) block_max = std::max(block_max, s[c0 + c]);
        const SoftmaxStep step = online_softmax_step(row_max, block_max);
        float sum = 0.0f, pv = 0.0f;
        for (int64_t c = 0; c < rows; ++c) {
          const float e = std::exp(s[c0 + c] - step.shift);
          ASSERT_FALSE(std::isnan(e));
          sum += e;
          pv += e * v[c0 + c];
        }
        row_sum = row_sum * step.alpha + sum;
        row_acc = row_acc * step.alpha + pv;
        row_max = step.max;
      }
      const float got_lse = finish_lse(row_max, row_sum);
      const float got_out = finish_output(row_acc, row_sum);
      if (pattern == 2) {
        EXPECT_EQ(got_lse, kNegInf);
        EXPECT_EQ(got_out, 0.0f);
      } else {
        EXPECT_NEAR(got_lse, lse, 1e-5 * std::max(1.0, std::fabs(lse)));
        EXPECT_NEAR(got_out, out, 1e-5);
        EXPECT_GT(std::fabs(out), 1e-3);  // non-trivial
      }
    }
  }
}

TEST(CudaTileMath, ProbabilityAndScoreGradient) {
  EXPECT_EQ(probability(3.0f, kNegInf), 0.0f);
  EXPECT_EQ(probability(kNegInf, 2.0f), 0.0f);
  EXPECT_FLOAT_EQ(probability(2.0f, 2.0f), 1.0f);
  EXPECT_FLOAT_EQ(probability(1.0f, 1.0f + std::log(4.0f)), 0.25f);
  EXPECT_FLOAT_EQ(score_gradient(0.25f, 3.0f, 1.0f), 0.5f);
  EXPECT_EQ(score_gradient(0.0f, 3.0f, 1.0f), 0.0f);
}

// ---- tiles and layouts ----------------------------------------------------------------------

HeadShape shape_of(int64_t n_q, int64_t n_k, int64_t d) { return {n_q, n_k, d, d}; }

TEST(CudaTiles, FitTheSharedMemoryBudgetAndComeFromThePlanner) {
  // Default 48 KiB, sm_86 (99 KiB), A100 (163 KiB) and H100/H200 (227 KiB) opt-in limits.
  for (const int64_t bytes : {49152, 101376, 166912, 232448}) {
    for (const int64_t d : {32, 64, 128}) {
      for (const int64_t n : {1, 97, 16384}) {
        for (const Pass pass : {Pass::forward, Pass::backward}) {
          for (const FlashMasking masking : {FlashMasking::dense, FlashMasking::block_sparse}) {
            const HeadShape shape = shape_of(n, n, d);
            SCOPED_TRACE(std::to_string(bytes) + " bytes, d " + std::to_string(d) + ", n " +
                         std::to_string(n) + (pass == Pass::forward ? " fwd" : " bwd"));
            const auto r = spattn::device::device_flash_tiles(shape, bytes / 4, pass, masking);
            EXPECT_LE(r.smem_words, bytes / 4);
            EXPECT_LE(r.cache_words, bytes / 4);
            EXPECT_EQ(r.smem_words, spattn::device::device_smem_words(shape, r.tiles, pass, masking));
            EXPECT_EQ(r.tiles, spattn::schedules::flash_tiles(shape, r.cache_words, pass, masking));
            // The planner's model words never exceed what the kernels hold.
            EXPECT_LE(spattn::schedules::flash_resident_words(shape, r.tiles, pass, FlashMasking::dense),
                      r.smem_words);
            if (n == 16384) {
              EXPECT_GE(r.tiles.block_q, bytes >= 166912 && d <= 64 ? 64 : 16);
            }
          }
        }
      }
    }
  }
  // d = 128 forward on an H100: the outer tile as large as the planner allows next to 16 key rows.
  const auto h100 = spattn::device::device_flash_tiles(shape_of(16384, 16384, 128), 232448 / 4,
                                                       Pass::forward, FlashMasking::block_sparse);
  EXPECT_GT(h100.tiles.block_q, 100);
  EXPECT_LT(h100.tiles.block_q, 232448 / 4 / 258 + 1);
}

TEST(CudaTiles, ABudgetBelowOneByOneTilesIsAClearError) {
  try {
    spattn::device::device_flash_tiles(shape_of(97, 97, 128), 300, Pass::backward, FlashMasking::block_sparse);
    FAIL() << "expected InvalidArgument";
  } catch (const spattn::InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("shared memory of 300 words"));
    EXPECT_THAT(e.what(), HasSubstr("head_dim 128"));
  }
}

template <typename Layout>
void expect_disjoint(const std::vector<std::pair<int64_t, int64_t>>& regions, const Layout& layout) {
  // regions: (offset, size) in allocation order: each starts where the previous ends.
  int64_t next = 0;
  for (const auto& [offset, size] : regions) {
    EXPECT_EQ(offset, next);
    EXPECT_GE(size, 0);
    next = offset + size;
  }
  EXPECT_EQ(next, layout.words);
}

TEST(CudaTiles, LayoutsAreDisjointAlignedAndCountedExactly) {
  const HeadShape s{97, 257, 32, 64};
  const FlashTiles t{13, 5, 7, 11};
  const int64_t d = s.head_dim, e = s.head_dim_v;
  for (const FlashMasking masking : {FlashMasking::dense, FlashMasking::block_sparse}) {
    const bool masked = masking == FlashMasking::block_sparse;
    const auto f = spattn::device::forward_layout(s, t, masking);
    expect_disjoint({{f.bits, masked ? 2 * ((13 * 5 + 63) / 64) : 0}, {f.q, 13 * d}, {f.acc, 13 * e},
                     {f.row_max, 13}, {f.row_sum, 13}, {f.alpha, 13}, {f.k, 5 * d}, {f.v, 5 * e},
                     {f.s, 13 * 5}},
                    f);
    const auto kv = spattn::device::dkdv_layout(s, t, masking);
    expect_disjoint({{kv.bits, masked ? 2 * ((11 * 7 + 63) / 64) : 0}, {kv.k, 11 * d}, {kv.v, 11 * e},
                     {kv.dk, 11 * d}, {kv.dv, 11 * e}, {kv.q, 7 * d}, {kv.d_o, 7 * e}, {kv.lse, 7},
                     {kv.delta, 7}, {kv.p, 7 * 11}},
                    kv);
    const auto q = spattn::device::dq_layout(s, t, masking);
    expect_disjoint({{q.bits, masked ? 2 * ((13 * 5 + 63) / 64) : 0}, {q.q, 13 * d}, {q.d_o, 13 * e},
                     {q.lse, 13}, {q.delta, 13}, {q.dq, 13 * d}, {q.k, 5 * d}, {q.v, 5 * e},
                     {q.p, 13 * 5}},
                    q);
    // The bit set sits at offset 0 and takes whole uint64 words: the float buffers after it keep
    // 8-byte alignment of the bits.
    EXPECT_EQ(f.bits, 0);
    EXPECT_EQ(f.q % 2, 0);
    // Dense: exactly the planner's resident words (flash.hpp), plus the forward's alpha.
    if (!masked) {
      EXPECT_EQ(f.words, spattn::schedules::flash_resident_words(s, t, Pass::forward) + 13);
      EXPECT_EQ(std::max(kv.words, q.words), spattn::schedules::flash_resident_words(s, t, Pass::backward));
    }
  }
}

// ---- tile lists ------------------------------------------------------------------------------

// The pairs a kernel visits: walk each outer tile's list with the kernels' functions and collect
// the attended elements as (query, key). `key_cols`: outer tiles are key tiles.
std::vector<std::vector<char>> walked_pairs(const TileListsRef& lists, int64_t head, int64_t n_q, int64_t n_k,
                                            int64_t outer_block, int64_t inner_block, bool key_cols) {
  std::vector<std::vector<char>> seen(static_cast<size_t>(n_q), std::vector<char>(static_cast<size_t>(n_k), 0));
  const int64_t outer_rows = key_cols ? n_k : n_q, inner_rows = key_cols ? n_q : n_k;
  const int64_t mask = mask_of_head(lists, head);
  for (int64_t outer = 0; outer < num_tiles(outer_rows, outer_block); ++outer) {
    for (ListWalk walk = start_walk(lists, mask, outer); walk.pos < walk.end;) {
      const VisitedTile visited = next_tile(lists, walk);
      const int64_t inner = visited.tile;
      const uint64_t* bits = visited.bits;
      for (int64_t r = 0; r < tile_rows(outer_rows, outer_block, outer); ++r) {
        for (int64_t c = 0; c < tile_rows(inner_rows, inner_block, inner); ++c) {
          if (!element_attends(bits, lists.inner_block, r, c)) continue;
          const int64_t a = outer * outer_block + r, b = inner * inner_block + c;
          char& cell = key_cols ? seen[static_cast<size_t>(b)][static_cast<size_t>(a)]
                                : seen[static_cast<size_t>(a)][static_cast<size_t>(b)];
          ++cell;  // a pair visited twice would show as 2
        }
      }
    }
  }
  return seen;
}

std::vector<std::vector<char>> mask_pairs(const Mask& mask) {
  const auto csr = mask.csr();
  std::vector<std::vector<char>> m(static_cast<size_t>(csr.num_rows), std::vector<char>(static_cast<size_t>(csr.num_cols), 0));
  for (int64_t i = 0; i < csr.num_rows; ++i)
    for (int64_t p = csr.row_begin(i); p < csr.row_end(i); ++p) m[static_cast<size_t>(i)][static_cast<size_t>(csr.col_idx[p])] = 1;
  return m;
}

TEST(CudaTileLists, WalkingTheDeviceListsVisitsExactlyTheMaskOnEveryPattern) {
  const int64_t shapes[][2] = {{1, 1}, {97, 257}, {257, 97}, {257, 257}};
  for (const auto& sh : shapes) {
    const int64_t n_q = sh[0], n_k = sh[1];
    const HeadShape shape{n_q, n_k, 8, 8};
    // A small budget gives many tiles of odd sizes, so tiles split and span the patterns' blocks.
    const auto planned = spattn::device::device_flash_tiles(shape, 1200, Pass::backward, FlashMasking::block_sparse);
    const FlashTiles& t = planned.tiles;
    for (const std::string& spec : spattn::testing::cuda_pattern_specs(n_q, n_k)) {
      SCOPED_TRACE(spec + " at " + std::to_string(n_q) + " x " + std::to_string(n_k));
      const Mask mask = spattn::testing::mask_of(spec, n_q, n_k);
      const auto fm = spattn::schedules::build_flash_mask(mask.csr(), n_q, n_k, t, Pass::backward);
      const auto rows = spattn::device::flatten_tile_lists({&fm.query_rows});
      const auto cols = spattn::device::flatten_tile_lists({&fm.key_cols});
      const auto expected = mask_pairs(mask);
      EXPECT_EQ(walked_pairs(spattn::device::host_ref(rows), 0, n_q, n_k, t.block_q, t.block_k, false), expected);
      EXPECT_EQ(walked_pairs(spattn::device::host_ref(cols), 0, n_q, n_k, t.dkdv_block_k, t.dkdv_block_q, true),
                expected);
    }
  }
}

TEST(CudaTileLists, PerHeadMasksAreSelectedByHeadAndDenseListsCoverEverything) {
  const int64_t n = 97;
  const HeadShape shape{n, n, 8, 8};
  const auto t = spattn::device::device_flash_tiles(shape, 900, Pass::forward, FlashMasking::block_sparse).tiles;
  const Mask a = Mask::from_spec("sliding_window:w=5", n, n);
  const Mask b = Mask::from_spec("random:p=0.2,seed=4", n, n);
  const auto fa = spattn::schedules::build_flash_mask(a.csr(), n, n, t, Pass::forward);
  const auto fb = spattn::schedules::build_flash_mask(b.csr(), n, n, t, Pass::forward);
  const auto flat = spattn::device::flatten_tile_lists({&fa.query_rows, &fb.query_rows});
  const TileListsRef ref = spattn::device::host_ref(flat);
  EXPECT_EQ(ref.num_masks, 2);
  EXPECT_EQ(walked_pairs(ref, 0, n, n, t.block_q, t.block_k, false), mask_pairs(a));
  EXPECT_EQ(walked_pairs(ref, 1, n, n, t.block_q, t.block_k, false), mask_pairs(b));
  EXPECT_NE(mask_pairs(a), mask_pairs(b));

  TileListsRef dense;
  dense.dense = true;
  dense.num_outer = num_tiles(n, t.block_q);
  dense.num_inner = num_tiles(n, t.block_k);
  dense.inner_block = t.block_k;
  EXPECT_EQ(walked_pairs(dense, 3, n, n, t.block_q, t.block_k, false), mask_pairs(Mask::full(n, n)));
}

TEST(CudaTileLists, ListsOfDifferentTilingsAreRefused) {
  const int64_t n = 64;
  const Mask mask = Mask::from_spec("causal", n, n);
  const auto f1 = spattn::schedules::build_flash_mask(mask.csr(), n, n, FlashTiles{8, 4, 0, 0}, Pass::forward);
  const auto f2 = spattn::schedules::build_flash_mask(mask.csr(), n, n, FlashTiles{16, 4, 0, 0}, Pass::forward);
  EXPECT_THROW(spattn::device::flatten_tile_lists({&f1.query_rows, &f2.query_rows}), spattn::InvalidArgument);
}

}  // namespace
