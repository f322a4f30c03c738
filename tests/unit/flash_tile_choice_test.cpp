// The mask-aware block-sparse flash tiles (plan/flash_tile_choice.hpp): the limited-outer
// nest tiles fit in M and leave flash_tiles() unchanged above the limit; the estimate is checked by
// hand and equals the FlashMask's exact pairs and words on contiguous masks (an upper bound on the
// others); full and random masks keep flash_tiles()' tiles, a band gets smaller outer tiles with
// fewer computed pairs; a run with the chosen tiles moves exactly the predicted words; bad input
// is refused with the argument named.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "plan/flash_tile_choice.hpp"

#include <spattn/error.hpp>
#include <spattn/io.hpp>

#include <sparse_formats/patterns.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using flash_detail::estimate_nest;
using flash_detail::FlashNest;
using flash_detail::mask_spans;
using flash_detail::NestTiles;
using ::testing::HasSubstr;
using Pattern = sparse_formats::CsrPattern<int64_t>;
constexpr FlashMasking kMasked = FlashMasking::block_sparse;

HeadShape shape_of(int64_t n_q, int64_t n_k, int64_t d) { return {n_q, n_k, d, d}; }

// Pairs in the (outer tile, inner tile) pairs the lists visit, tile by tile.
int64_t visited_pairs(const FlashTileLists& lists) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    lists.for_each_tile(i, [&](int64_t tile, bool) {
      pairs += flash_detail::tile_rows(lists.outer_rows, lists.outer_block, i) *
               flash_detail::tile_rows(lists.inner_rows, lists.inner_block, tile);
    });
  }
  return pairs;
}
int64_t bit_words(const FlashTileLists& lists) { return lists.num_partial() * lists.bit_words; }

TEST(FlashNestTiles, TheLimitCapsTheOuterTileAndFits) {
  for (const int64_t d : {1, 7, 64, 128}) {
    for (const int64_t n : {1, 97, 4096}) {
      const HeadShape s = shape_of(n, n + 3, d);
      for (const int64_t m : {flash_min_cache_words(s, Pass::backward, kMasked), int64_t{12288}, int64_t{49152}}) {
        SCOPED_TRACE("d " + std::to_string(d) + ", n " + std::to_string(n) + ", M " + std::to_string(m));
        const FlashTiles fwd = flash_tiles(s, m, Pass::forward, kMasked);
        const FlashTiles bwd = flash_tiles(s, m, Pass::backward, kMasked);
        // No limit, or one at or above the outer tile: flash_tiles()' own tiles.
        const NestTiles f = flash_detail::nest_tiles(s, m, FlashNest::forward, kMasked, INT64_MAX);
        EXPECT_EQ(f.outer, fwd.block_q);
        EXPECT_EQ(f.inner, fwd.block_k);
        const NestTiles q = flash_detail::nest_tiles(s, m, FlashNest::dq, kMasked, bwd.block_q);
        EXPECT_EQ(q.outer, bwd.block_q);
        EXPECT_EQ(q.inner, bwd.block_k);
        const NestTiles kv = flash_detail::nest_tiles(s, m, FlashNest::dkdv, kMasked, INT64_MAX);
        EXPECT_EQ(kv.outer, bwd.dkdv_block_k);
        EXPECT_EQ(kv.inner, bwd.dkdv_block_q);
        // Below it: the outer tile is the limit, the inner tile at most 16 rows, and it fits.
        for (const int64_t limit : {int64_t{1}, int64_t{32}, int64_t{48}}) {
          if (limit >= fwd.block_q || limit >= bwd.block_q || limit >= bwd.dkdv_block_k) continue;
          const NestTiles lf = flash_detail::nest_tiles(s, m, FlashNest::forward, kMasked, limit);
          const NestTiles lq = flash_detail::nest_tiles(s, m, FlashNest::dq, kMasked, limit);
          const NestTiles lk = flash_detail::nest_tiles(s, m, FlashNest::dkdv, kMasked, limit);
          for (const NestTiles& t : {lf, lq, lk}) {
            EXPECT_EQ(t.outer, limit);
            EXPECT_GE(t.inner, 1);
            EXPECT_LE(t.inner, 16);
          }
          EXPECT_LE(flash_resident_words(s, {lf.outer, lf.inner, 0, 0}, Pass::forward, kMasked), m);
          EXPECT_LE(flash_resident_words(s, {lq.outer, lq.inner, lk.inner, lk.outer}, Pass::backward, kMasked), m);
        }
      }
    }
  }
}

// The 8 x 8 diagonal, d = e = 1. Forward (query tiles of 4, key tiles of 2): each query tile's
// span is its own 4 keys, 2 key tiles: 16 pairs; words 3 (header) + 4 (Q) + 4 x 2 (K, V) + 2
// (entries) = 17. dK/dV (key tiles of 4, query tiles of 2): each query tile meets 1 key tile of 4:
// 8 pairs, 2 x 4 (Q, dO, LSE, D) + 1 (entry) words; each key tile 3 + 4 x 2 words.
TEST(FlashTileEstimate, HandChecked) {
  const HeadShape s = shape_of(8, 8, 1);
  const Pattern diagonal = sparse_formats::sliding_window_pattern<int64_t>(8, 8, 0);
  const auto spans = mask_spans(diagonal.view());
  const auto fwd = estimate_nest(s, FlashNest::forward, {4, 2}, spans);
  EXPECT_EQ(fwd.pairs, 32);
  EXPECT_EQ(fwd.words, 34);
  EXPECT_EQ(fwd.flops_per_pair, 4);
  EXPECT_EQ(fwd.cost(), kFlopsPerWord * 34 + 4 * 32);
  const auto kv = estimate_nest(s, FlashNest::dkdv, {4, 2}, spans);
  EXPECT_EQ(kv.pairs, 32);
  EXPECT_EQ(kv.words, 4 * 9 + 2 * 11);
  EXPECT_EQ(kv.flops_per_pair, 8);
  const auto dq = estimate_nest(s, FlashNest::dq, {4, 2}, spans);
  EXPECT_EQ(dq.pairs, 32);
  EXPECT_EQ(dq.words, 2 * (3 + 4 * 4 + 4 * 2 + 2));
  EXPECT_EQ(dq.flops_per_pair, 6);
  // A row that attends nothing: no span; an empty mask costs only the list headers.
  const Pattern empty = sparse_formats::documents_pattern<int64_t>(8, 8, {8}, {8});
  Pattern none = empty;
  none.col_idx.clear();
  std::fill(none.row_ptr.begin(), none.row_ptr.end(), 0);
  const auto nothing = estimate_nest(s, FlashNest::forward, {4, 2}, mask_spans(none.view()));
  EXPECT_EQ(nothing.pairs, 0);
  EXPECT_EQ(nothing.words, 2 * 3);
}

struct Case {
  std::string name;
  Pattern pattern;
  bool contiguous;  // every query tile's attended keys form one span
};

std::vector<Case> cases(int64_t n_q, int64_t n_k) {
  std::vector<Case> out;
  out.push_back({"causal", sparse_formats::causal_pattern<int64_t>(n_q, n_k), true});
  out.push_back({"documents", sparse_formats::documents_pattern<int64_t>(n_q, n_k, {n_q / 3, n_q - n_q / 3},
                                                                          {n_k / 2, n_k - n_k / 2}),
                 true});
  out.push_back({"random 0.05", sparse_formats::random_pattern<int64_t>(n_q, n_k, 0.05, 7), false});
  if (n_q == n_k) {
    out.push_back({"window 5", sparse_formats::sliding_window_pattern<int64_t>(n_q, n_k, 5), true});
    out.push_back({"bigbird", sparse_formats::bigbird_pattern<int64_t>(n_q, n_k, {8, 1, 1, 1, 3}), false});
  }
  return out;
}

// On contiguous masks the estimate is the FlashMask's exact count (pairs in visited tiles; words =
// the predicted value reads + index reads without the partial tiles' bit sets, plus the
// backward's D pre-pass reads 2 n_q e); on the others an upper bound on the pairs.
TEST(FlashTileEstimate, EqualsTheFlashMaskOnContiguousMasks) {
  const std::vector<std::pair<int64_t, int64_t>> sizes{{1, 1}, {7, 7}, {97, 97}, {257, 257}, {97, 257}, {257, 97}};
  for (const auto& [n_q, n_k] : sizes) {
    const HeadShape s = shape_of(n_q, n_k, 3);
    for (const Case& c : cases(n_q, n_k)) {
      const auto spans = mask_spans(c.pattern.view());
      for (const FlashTiles tiles : {FlashTiles{4, 2, 3, 5}, FlashTiles{32, 16, 16, 48}, FlashTiles{7, 13, 11, 1}}) {
        SCOPED_TRACE(c.name + ", " + std::to_string(n_q) + " x " + std::to_string(n_k) + ", tiles " +
                     std::to_string(tiles.block_q) + " " + std::to_string(tiles.block_k) + " " +
                     std::to_string(tiles.dkdv_block_q) + " " + std::to_string(tiles.dkdv_block_k));
        const FlashMask fm = build_flash_mask(c.pattern.view(), n_q, n_k, tiles, Pass::forward);
        const FlashMask bm = build_flash_mask(c.pattern.view(), n_q, n_k, tiles, Pass::backward);
        const auto fwd = estimate_nest(s, FlashNest::forward, {tiles.block_q, tiles.block_k}, spans);
        const auto dq = estimate_nest(s, FlashNest::dq, {tiles.block_q, tiles.block_k}, spans);
        const auto kv = estimate_nest(s, FlashNest::dkdv, {tiles.dkdv_block_k, tiles.dkdv_block_q}, spans);
        if (!c.contiguous) {
          EXPECT_GE(fwd.pairs, visited_pairs(fm.query_rows));
          EXPECT_GE(kv.pairs, visited_pairs(bm.key_cols));
          continue;
        }
        EXPECT_EQ(fwd.pairs, visited_pairs(fm.query_rows));
        EXPECT_EQ(dq.pairs, visited_pairs(bm.query_rows));
        EXPECT_EQ(kv.pairs, visited_pairs(bm.key_cols));
        const FlashWords f = predict_flash_forward_words(s, tiles, &fm);
        EXPECT_EQ(fwd.words, f.values.reads + f.indices.reads - bit_words(fm.query_rows));
        const FlashWords b = predict_flash_backward_words(s, tiles, &bm);
        EXPECT_EQ(dq.words + kv.words + 2 * n_q * s.head_dim_v,
                  b.values.reads + b.indices.reads - bit_words(bm.query_rows) - bit_words(bm.key_cols));
      }
    }
  }
}

// Where every tile holds attended pairs, fewer rows per outer tile save no pair: the choice moves
// no more words than flash_tiles()' tiles (it may differ where a smaller tile splits the sequence
// into as many tiles and needs fewer list entries).
TEST(FlashTilesForMask, FullAndRandomMasksMoveNoMoreWords) {
  for (const int64_t n : {7, 257}) {
    const HeadShape s = shape_of(n, n, 16);
    const Pattern full = sparse_formats::full_pattern<int64_t>(n, n);
    const Pattern random = sparse_formats::random_pattern<int64_t>(n, n, 0.3, 11);
    for (const int64_t m : {flash_min_cache_words(s, Pass::backward, kMasked), int64_t{2000}, int64_t{20000}}) {
      for (const Pass pass : {Pass::forward, Pass::backward}) {
        for (const Pattern* pattern : {&full, &random}) {
          SCOPED_TRACE("n " + std::to_string(n) + ", M " + std::to_string(m) + ", " + pass_name(pass) +
                       (pattern == &full ? ", full" : ", random"));
          const FlashTiles base = flash_tiles(s, m, pass, kMasked);
          const FlashTiles tiles = flash_tiles_for_mask(s, m, pass, pattern->view());
          const FlashMask chosen = build_flash_mask(pattern->view(), n, n, tiles, pass);
          const FlashMask old = build_flash_mask(pattern->view(), n, n, base, pass);
          const auto words = [&](const FlashTiles& t, const FlashMask& fm) {
            return pass == Pass::forward ? predict_flash_forward(s, t, &fm).total()
                                         : predict_flash_backward(s, t, &fm).total();
          };
          EXPECT_LE(words(tiles, chosen), words(base, old));
          EXPECT_LE(visited_pairs(chosen.query_rows), visited_pairs(old.query_rows));
          if (pattern == &full) {
            EXPECT_EQ(visited_pairs(chosen.query_rows), n * n);
          }
        }
      }
    }
  }
}

// The bench's window (w = 128) at the default M: every outer tile shrinks, the pairs computed stay
// within 30 % of the attended ones (flash_tiles()' compute 43 % to 125 % more here) and fall by at
// least a tenth, the tiles fit, and the choice is the same every time.
TEST(FlashTilesForMask, BandGetsSmallerOuterTiles) {
  const int64_t n = 1024, m = 49152;
  const Pattern window = sparse_formats::sliding_window_pattern<int64_t>(n, n, 128);
  for (const int64_t d : {64, 128}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const HeadShape s = shape_of(n, n, d);
    const FlashTiles base = flash_tiles(s, m, Pass::backward, kMasked);
    const FlashTiles tiles = flash_tiles_for_mask(s, m, Pass::backward, window.view());
    EXPECT_EQ(tiles, flash_tiles_for_mask(s, m, Pass::backward, window.view()));
    EXPECT_LT(tiles.block_q, base.block_q);
    EXPECT_LT(tiles.dkdv_block_k, base.dkdv_block_k);
    EXPECT_GE(tiles.block_q, 32);
    EXPECT_LE(flash_resident_words(s, tiles, Pass::backward, kMasked), m);
    const FlashMask chosen = build_flash_mask(window.view(), n, n, tiles, Pass::backward);
    const FlashMask old = build_flash_mask(window.view(), n, n, base, Pass::backward);
    const int64_t attended = window.nnz();
    for (const FlashTileLists* lists : {&chosen.query_rows, &chosen.key_cols}) {
      EXPECT_LE(visited_pairs(*lists), attended + attended * 30 / 100);
    }
    EXPECT_LT(10 * visited_pairs(chosen.query_rows), 9 * visited_pairs(old.query_rows));
    EXPECT_LT(10 * visited_pairs(chosen.key_cols), 9 * visited_pairs(old.key_cols));
    const FlashTiles fwd = flash_tiles_for_mask(s, m, Pass::forward, window.view());
    EXPECT_LT(fwd.block_q, flash_tiles(s, m, Pass::forward, kMasked).block_q);
    EXPECT_LE(flash_resident_words(s, fwd, Pass::forward, kMasked), m);
  }
}

// max_words caps the words: a candidate whose bound exceeds it is skipped (flash_tiles()' own
// tiles for time stay allowed whatever the cap), so the chosen tiles move at most max_words when
// those do.
TEST(FlashTilesForMask, MaxWordsCapsTheWordsMoved) {
  const int64_t n = 1024, d = 64, m = 49152;
  const HeadShape s = shape_of(n, n, d);
  const Pattern window = sparse_formats::sliding_window_pattern<int64_t>(n, n, 128);
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    SCOPED_TRACE(pass_name(pass));
    auto words = [&](const FlashTiles& t) {
      const FlashMask fm = build_flash_mask(window.view(), n, n, t, pass);
      return pass == Pass::forward ? predict_flash_forward(s, t, &fm).total() : predict_flash_backward(s, t, &fm).total();
    };
    const FlashTiles own = flash_tiles(s, m, pass, kMasked, spattn::PlanObjective::time);
    const FlashTiles free_choice = flash_tiles_for_mask(s, m, pass, window.view());
    const int64_t own_words = words(own), free_words = words(free_choice);
    ASSERT_GT(free_words, own_words);  // the band trades words for pairs
    for (const int64_t cap : {own_words - 1, own_words, (own_words + free_words) / 2, free_words}) {
      const FlashTiles tiles = flash_tiles_for_mask(s, m, pass, window.view(), cap);
      if (cap < own_words) {
        EXPECT_EQ(tiles, own);
      } else {
        EXPECT_LE(words(tiles), cap);
      }
    }
    const FlashTiles middle = flash_tiles_for_mask(s, m, pass, window.view(), (own_words + free_words) / 2);
    EXPECT_LT(middle.block_q, own.block_q);
  }
}

// A run with the chosen tiles (smaller than flash_tiles()' here) moves exactly the predicted words,
// and its outputs match the run with flash_tiles()' tiles (the same arithmetic, other blocking).
TEST(FlashTilesForMask, RunMovesThePredictedWords) {
  for (const int64_t n : {97, 257}) {
    const int64_t d = 8, m = 6000;
    const HeadShape s = shape_of(n, n, d);
    const Pattern window = sparse_formats::sliding_window_pattern<int64_t>(n, n, 6);
    std::mt19937_64 engine(static_cast<uint64_t>(n));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    auto random = [&](int64_t count) {
      std::vector<float> v(static_cast<size_t>(count));
      for (float& x : v) x = uniform(engine);
      return v;
    };
    const std::vector<float> q = random(n * d), k = random(n * d), v = random(n * d), d_o = random(n * d);
    auto in = [](const std::vector<float>& x, int64_t rows, int64_t cols) {
      return SlowMatrix<const float>::dense(x.data(), rows, cols);
    };
    auto out = [](std::vector<float>& x, int64_t rows, int64_t cols) { return SlowMatrix<float>::dense(x.data(), rows, cols); };
    struct Result {
      std::vector<float> o, lse, dq, dk, dv;
    };
    auto run = [&](const FlashTiles& fwd_tiles, const FlashTiles& bwd_tiles) {
      Result r;
      r.o.assign(static_cast<size_t>(n * d), 0.0f);
      r.lse.assign(static_cast<size_t>(n), 0.0f);
      r.dq = r.dk = r.dv = r.o;
      std::vector<float> delta(static_cast<size_t>(n));
      const FlashMask fm = build_flash_mask(window.view(), n, n, fwd_tiles, Pass::forward);
      const FlashMask bm = build_flash_mask(window.view(), n, n, bwd_tiles, Pass::backward);
      spattn::io::Ledger forward_ledger, backward_ledger;
      spattn::io::FastMemory forward_fast(m, &forward_ledger, "forward");
      flash_forward(forward_fast, {in(q, n, d), in(k, n, d), in(v, n, d), out(r.o, n, d), out(r.lse, n, 1), 0.5f},
                    fwd_tiles, &fm);
      EXPECT_EQ(forward_ledger.total().reads + forward_ledger.total().writes,
                predict_flash_forward(s, fwd_tiles, &fm).total());
      spattn::io::FastMemory backward_fast(m, &backward_ledger, "backward");
      flash_backward(backward_fast,
                     {in(q, n, d), in(k, n, d), in(v, n, d), in(r.o, n, d), in(r.lse, n, 1), in(d_o, n, d),
                      out(delta, n, 1), out(r.dq, n, d), out(r.dk, n, d), out(r.dv, n, d), 0.5f},
                     bwd_tiles, &bm);
      EXPECT_EQ(backward_ledger.total().reads + backward_ledger.total().writes,
                predict_flash_backward(s, bwd_tiles, &bm).total());
      EXPECT_LE(backward_ledger.peak_resident(), m);
      return r;
    };
    SCOPED_TRACE("n " + std::to_string(n));
    const FlashTiles fwd = flash_tiles_for_mask(s, m, Pass::forward, window.view());
    const FlashTiles bwd = flash_tiles_for_mask(s, m, Pass::backward, window.view());
    ASSERT_LT(fwd.block_q, flash_tiles(s, m, Pass::forward, kMasked).block_q);
    const Result chosen = run(fwd, bwd);
    const Result base = run(flash_tiles(s, m, Pass::forward, kMasked), flash_tiles(s, m, Pass::backward, kMasked));
    auto check = [](const std::vector<float>& a, const std::vector<float>& b, const char* name) {
      double largest = 0.0;
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 1e-5 * (1.0 + std::fabs(b[i]))) << name << " [" << i << "]";
        largest = std::max(largest, static_cast<double>(std::fabs(a[i])));
      }
      EXPECT_GT(largest, 0.01) << name << " is trivial";
    };
    check(chosen.o, base.o, "O");
    check(chosen.lse, base.lse, "LSE");
    check(chosen.dq, base.dq, "dQ");
    check(chosen.dk, base.dk, "dK");
    check(chosen.dv, base.dv, "dV");
  }
}

TEST(FlashTilesForMask, RefusesBadInput) {
  const HeadShape s = shape_of(7, 9, 4);
  const Pattern square = sparse_formats::causal_pattern<int64_t>(7, 7);
  try {
    flash_tiles_for_mask(s, 10000, Pass::forward, square.view());
    FAIL() << "a 7 x 7 mask for a 7 x 9 problem was accepted";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("the mask is 7 x 7, the problem 7 x 9"));
  }
  const Pattern mask = sparse_formats::causal_pattern<int64_t>(7, 9);
  const int64_t minimum = flash_min_cache_words(s, Pass::backward, kMasked);
  try {
    flash_tiles_for_mask(s, minimum - 1, Pass::backward, mask.view());
    FAIL() << "M below the minimum was accepted";
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr("is below the minimum " + std::to_string(minimum)));
  }
  EXPECT_EQ(flash_tiles_for_mask(s, minimum, Pass::backward, mask.view()), (FlashTiles{1, 1, 1, 1}));
}

}  // namespace
