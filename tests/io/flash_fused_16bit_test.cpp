// The flash backward with dQ in the dK/dV pass over 16-bit tensors (flash_dq_partials.hpp): dQ's
// sums stay float32 until each query tile's last term, so a float16 run gives exactly the float32
// run's gradients on the same values, each rounded once to float16; it moves the same words and
// lines as that run, as predicted, for every layout of dq (rows along its columns, along its rows,
// or neither), dense and over masks (query tiles no key tile visits included), on any number of
// workers. bfloat16 takes the same path: counted == predicted, gradients within its rounding. The
// sums' pages are given back behind the lowest open query tile.
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_dq_partials.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "support/flash_runs.hpp"
#include "support/half_precision.hpp"
#include "support/reference_fixtures.hpp"

#include <spattn/elements.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::Ledger;
using spattn::io::SlowMatrix;
using spattn::io::WordKind;
using spattn::testing::HeadFixture;
using spattn::testing::pattern_of;
using spattn::schedules::flash_detail::DqPartials;
using spattn::testing::half_precision::nan_filled;
using spattn::testing::half_precision::to_elements;
using spattn::testing::half_precision::to_floats;
using Mask = sparse_formats::CsrPattern<int64_t>;

// How dq is laid out in both runs: row-major, column-major, or with no unit stride.
enum class Layout { rows, columns, strided };

// A dq view of `layout` over `words` (m x d; the strided layout takes 2 m d words).
template <typename W>
SlowMatrix<float> dq_view(W* words, int64_t m, int64_t d, Layout layout) {
  switch (layout) {
    case Layout::rows: return SlowMatrix<float>(words, m, d, d, 1);
    case Layout::columns: return SlowMatrix<float>(words, m, d, 1, m);
    case Layout::strided: break;
  }
  return SlowMatrix<float>(words, m, d, 2 * d, 2);
}
int64_t dq_words(int64_t m, int64_t d, Layout layout) { return (layout == Layout::strided ? 2 : 1) * m * d; }
// dq's element (r, c) in `layout`.
int64_t dq_index(int64_t r, int64_t c, int64_t m, int64_t d, Layout layout) {
  switch (layout) {
    case Layout::rows: return r * d + c;
    case Layout::columns: return c * m + r;
    case Layout::strided: break;
  }
  return r * 2 * d + c * 2;
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

struct Run {
  explicit Run(int64_t line_words) : ledger(line_words) {}
  std::vector<float> dq, dk, dv;  // float32: the run's values; 16-bit: widened
  Ledger ledger;
};

// The fused backward of `head` (its inputs already T values, o and lse from the forward) with
// `tiles` on `threads` workers, dq laid out as `layout`: in float32 (T = float) or in T.
template <typename T>
Run run_fused(const HeadFixture& head, const FlashTiles& tiles, const FlashMask* mask, int threads, Layout layout,
              int64_t line_words) {
  const HeadShape& s = head.shape;
  const int64_t m = s.seqlen_q, n = s.seqlen_k, d = s.head_dim, e = s.head_dim_v;
  Run run(line_words);
  std::vector<T> q = to_elements<T>(head.q), k = to_elements<T>(head.k), v = to_elements<T>(head.v),
                 o = to_elements<T>(head.o), d_o = to_elements<T>(head.d_o);
  std::vector<T> dq = nan_filled<T>(dq_words(m, d, layout)), dk = nan_filled<T>(n * d), dv = nan_filled<T>(n * e);
  std::vector<float> lse = head.lse, delta(static_cast<size_t>(m), HeadFixture::kNan);
  const HeadBackward view{SlowMatrix<const float>(q.data(), m, d, d),     SlowMatrix<const float>(k.data(), n, d, d),
                          SlowMatrix<const float>(v.data(), n, e, e),     SlowMatrix<const float>(o.data(), m, e, e),
                          SlowMatrix<const float>(lse.data(), m, 1, 1),   SlowMatrix<const float>(d_o.data(), m, e, e),
                          SlowMatrix<float>(delta.data(), m, 1, 1),       dq_view(dq.data(), m, d, layout),
                          SlowMatrix<float>(dk.data(), n, d, d),          SlowMatrix<float>(dv.data(), n, e, e),
                          head.scale};
  const int64_t cache_words = flash_resident_words(s, tiles, Pass::backward,
                                                   mask != nullptr ? FlashMasking::block_sparse : FlashMasking::dense);
  flash_backward_heads(FlashTeam{threads, cache_words, &run.ledger}, {view}, tiles, mask);
  run.dq = to_floats(dq);
  run.dk = to_floats(dk);
  run.dv = to_floats(dv);
  return run;
}

// The 16-bit run against the float32 one: the same words and lines as predicted, and each gradient
// the float32 one rounded to T (exactly, where `exact`; else within T's rounding of the largest).
template <typename T>
void check_16bit(const std::string& what, const HeadShape& s, const Mask* mask, const FlashTiles& tiles, int threads,
                 Layout layout, bool exact) {
  SCOPED_TRACE(what + ": " + std::to_string(s.seqlen_q) + " x " + std::to_string(s.seqlen_k) + ", d " +
               std::to_string(s.head_dim) + ", " + std::to_string(threads) + " workers, layout " +
               std::to_string(static_cast<int>(layout)));
  HeadFixture head(s);
  for (std::vector<float>* x : {&head.q, &head.k, &head.v, &head.d_o}) *x = spattn::testing::half_precision::rounded<T>(*x);
  const auto masking = mask != nullptr ? FlashMasking::block_sparse : FlashMasking::dense;
  const FlashTiles fwd = flash_tiles(s, 1 << 20, Pass::forward, masking);
  std::unique_ptr<FlashMask> fwd_mask, bwd_mask;
  if (mask != nullptr) {
    fwd_mask = std::make_unique<FlashMask>(build_flash_mask(mask->view(), s.seqlen_q, s.seqlen_k, fwd, Pass::forward));
    bwd_mask = std::make_unique<FlashMask>(build_flash_mask(mask->view(), s.seqlen_q, s.seqlen_k, tiles, Pass::backward));
  }
  spattn::testing::run_flash_forward(head, fwd, 1 << 20, fwd_mask.get());
  head.o = spattn::testing::half_precision::rounded<T>(head.o);  // a 16-bit call's O

  const int64_t line_words = 32;  // a 64-byte line of 16-bit elements
  const Run f32 = run_fused<float>(head, tiles, bwd_mask.get(), threads, layout, line_words);
  const Run h16 = run_fused<T>(head, tiles, bwd_mask.get(), threads, layout, line_words);
  const FlashWords words = predict_flash_backward_words(s, tiles, bwd_mask.get());
  const FlashWords lines = predict_flash_backward_lines(s, tiles, bwd_mask.get(), line_words);
  const auto totals = [](const Run& run) {
    std::vector<int64_t> t;
    for (const WordKind kind : {WordKind::value, WordKind::index}) {
      t.insert(t.end(), {run.ledger.total(kind).reads, run.ledger.total(kind).writes, run.ledger.total_lines(kind).reads,
                         run.ledger.total_lines(kind).writes});
    }
    return t;
  };
  EXPECT_EQ(totals(h16), totals(f32));
  EXPECT_EQ(h16.ledger.peak_resident(), f32.ledger.peak_resident());
  if (layout == Layout::rows) {  // the layout the predictions are made for
    EXPECT_EQ(totals(h16), (std::vector<int64_t>{words.values.reads, words.values.writes, lines.values.reads,
                                                 lines.values.writes, words.indices.reads, words.indices.writes,
                                                 lines.indices.reads, lines.indices.writes}));
  }
  const int64_t m = s.seqlen_q, d = s.head_dim;
  const auto expect_rounded = [&](const char* name, const std::vector<float>& wide, const std::vector<float>& got,
                                  int64_t rows, int64_t cols, bool is_dq) {
    const auto at = [&](int64_t r, int64_t c) { return static_cast<size_t>(is_dq ? dq_index(r, c, m, d, layout) : r * cols + c); };
    double largest = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) largest = std::max(largest, std::abs(double{wide[at(r, c)]}));
    }
    if (mask == nullptr && rows * cols > 0 && s.seqlen_q > 0 && s.seqlen_k > 0) {
      EXPECT_GT(largest, 1e-3) << name << ": trivially 0";
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = at(r, c);
        ASSERT_FALSE(std::isnan(got[i])) << name << " (" << r << ", " << c << ") never written";
        if (exact) {
          ASSERT_TRUE(same_bits(spattn::from_float<T>(wide[i]), spattn::from_float<T>(got[i])))
              << name << " (" << r << ", " << c << "): " << got[i] << ", float32 run " << wide[i];
        } else {
          ASSERT_NEAR(got[i], wide[i], 0.02 * largest) << name << " (" << r << ", " << c << ")";
        }
      }
    }
  };
  expect_rounded("dq", f32.dq, h16.dq, m, d, true);
  expect_rounded("dk", f32.dk, h16.dk, s.seqlen_k, d, false);
  expect_rounded("dv", f32.dv, h16.dv, s.seqlen_k, s.head_dim_v, false);
}

// Rows 32 .. 63 of a 64 x 64 mask attend nothing: their query tiles are never visited.
Mask upper_half_mask() {
  Mask upper = Mask::empty(64, 64);
  for (int64_t r = 0; r < 64; ++r) {
    if (r < 32) {
      for (int64_t c = 0; c < 64; c += 2) upper.col_idx.push_back(c);
    }
    upper.row_ptr[static_cast<size_t>(r) + 1] = static_cast<int64_t>(upper.col_idx.size());
  }
  return upper;
}

TEST(FlashFused16Bit, Float16IsTheFloat32RunRoundedOnceAndMovesTheSameWords) {
  for (const Layout layout : {Layout::rows, Layout::columns, Layout::strided}) {
    for (const HeadShape& s : {HeadShape{257, 257, 16, 16}, HeadShape{97, 61, 8, 16}, HeadShape{7, 7, 3, 5},
                               HeadShape{33, 33, 1, 1}}) {
      for (const int threads : {1, 2, 3}) {
        check_16bit<spattn::half_t>("dense", s, nullptr, FlashTiles{16, 0, 8, 16, true}, threads, layout, true);
      }
      for (const char* spec : {"causal", "sliding_window:w=16", "documents:num_docs=3,causal=1"}) {
        const Mask mask = pattern_of(spec, s.seqlen_q, s.seqlen_k);
        check_16bit<spattn::half_t>(spec, s, &mask, FlashTiles{16, 0, 8, 16, true}, 2, layout, true);
      }
    }
    const Mask upper = upper_half_mask();
    check_16bit<spattn::half_t>("rows 32 .. 63 empty", HeadShape{64, 64, 8, 8}, &upper, FlashTiles{16, 0, 8, 16, true},
                                2, layout, true);
  }
}

// bfloat16 where the kernels may take bfloat16 pairs (AVX512_BF16): products rounded differently,
// the same words; dq is still one float32 sum rounded once, so it stays within bfloat16's rounding.
TEST(FlashFused16Bit, Bfloat16MovesTheSameWordsWithinItsRounding) {
  for (const HeadShape& s : {HeadShape{257, 257, 32, 32}, HeadShape{97, 61, 16, 16}}) {
    for (const char* spec : {"full", "causal", "sliding_window:w=40"}) {
      const bool dense = std::string(spec) == "full";
      const Mask mask = dense ? Mask::empty(1, 1) : pattern_of(spec, s.seqlen_q, s.seqlen_k);
      for (const int threads : {1, 2}) {
        check_16bit<spattn::bfloat16_t>(spec, s, dense ? nullptr : &mask, FlashTiles{32, 0, 16, 32, true}, threads,
                                        Layout::rows, false);
      }
    }
  }
}

// The partial sums' pages: a query tile's sums are given back once every tile below it is
// finished, in runs of at least 4 MiB (2^20 words) or the rest of a finished head, and never a row
// that a tile still open holds. Key tiles visit a band of query tiles (tile kt: kt .. kt + 3),
// except that query tiles 300 .. 399 are visited by none; then a dense problem, whose tiles all
// stay open to the last key tile.
#if defined(__unix__)
TEST(FlashFused16Bit, FinishedRowsOfThePartialSumsAreGivenBack) {
  const int64_t n = 65536, d = 64, block = 64, tiles = n / block;  // 2^22 words of sums per head
  const HeadShape s{n, n, d, d};
  const FlashTiles fused_tiles{block, 0, block, block, true};
  const auto unvisited = [](int64_t t) { return t >= 300 && t < 400; };
  FlashMask band;
  band.seqlen_q = band.seqlen_k = n;
  band.pass = Pass::backward;
  band.tiles = fused_tiles;
  band.key_cols.outer_rows = band.key_cols.inner_rows = n;
  band.key_cols.outer_block = band.key_cols.inner_block = block;
  band.key_cols.run_ptr.clear();
  for (int64_t kt = 0; kt < tiles; ++kt) {
    band.key_cols.run_ptr.push_back(band.key_cols.num_runs());
    band.key_cols.partial_ptr.push_back(0);
    for (int64_t qt = kt; qt < std::min(kt + 4, tiles); ++qt) {
      if (!unvisited(qt)) band.key_cols.append_run(qt, 1, false);
    }
  }
  band.key_cols.run_ptr.push_back(band.key_cols.num_runs());
  std::vector<HeadBackward> heads(2);
  for (HeadBackward& head : heads) head.dq = SlowMatrix<float>(static_cast<spattn::bfloat16_t*>(nullptr), n, d, d);

  DqPartials partials(heads, s, fused_tiles, &band);
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t kt = 0; kt < tiles; ++kt) {
      band.key_cols.for_each_tile(kt, [&](int64_t qt, bool) {
        // Tile qt's last visit is key tile qt's (the band of every key tile below reaches it).
        const bool last = partials.last_visit(h, qt);
        ASSERT_EQ(last, qt == kt) << "head " << h << ", key tile " << kt << ", query tile " << qt;
        if (last) partials.finished(h, qt);
      });
      // Tiles 0 .. kt are finished, and so are the unvisited ones above them.
      const int64_t lowest_open = unvisited(kt + 1) ? 400 : kt + 1;
      const int64_t finished_words = lowest_open * block * d;
      const int64_t released = partials.released_words(h);
      ASSERT_LE(released, finished_words) << "key tile " << kt;
      ASSERT_GE(released, finished_words - (int64_t{1} << 20) - 1024) << "key tile " << kt;
    }
    EXPECT_EQ(partials.released_words(h), n * d);
  }

  DqPartials dense(heads, s, fused_tiles, nullptr);
  for (int64_t kt = 0; kt < tiles; ++kt) {
    for (int64_t qt = 0; qt < tiles; ++qt) {
      if (dense.last_visit(0, qt)) dense.finished(0, qt);
    }
    EXPECT_EQ(dense.released_words(0), kt + 1 < tiles ? 0 : n * d) << "key tile " << kt;
  }
}
#endif

}  // namespace
