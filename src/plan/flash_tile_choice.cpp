// The block-sparse flash tiles for one mask: the candidates, the estimate and the choice
// (flash_tile_choice.hpp).
#include "plan/flash_tile_choice.hpp"

#include "schedules/flash/flash_flops.hpp"


#include <spattn/error.hpp>

#include <algorithm>
#include <vector>

namespace spattn::schedules {
namespace flash_detail {

template <typename Index>
MaskSpans mask_spans(const sparse_formats::CsrPatternView<Index>& mask) {
  MaskSpans spans;
  spans.seqlen_k = mask.num_cols;
  spans.first.assign(static_cast<size_t>(mask.num_rows), mask.num_cols);
  spans.last.assign(static_cast<size_t>(mask.num_rows), -1);
  if (mask.nnz() == 0) return spans;  // (an empty pattern may have no arrays)
  for (int64_t r = 0; r < mask.num_rows; ++r) {
    const int64_t begin = mask.row_begin(r), end = mask.row_end(r);
    if (begin == end) continue;
    spans.first[static_cast<size_t>(r)] = static_cast<int64_t>(mask.col_idx[begin]);
    spans.last[static_cast<size_t>(r)] = static_cast<int64_t>(mask.col_idx[end - 1]);
  }
  return spans;
}

MaskSpans mask_spans(const sparse_formats::IntervalPattern& mask) {
  MaskSpans spans;
  spans.seqlen_k = mask.num_cols;
  spans.first.assign(static_cast<size_t>(mask.num_rows), mask.num_cols);
  spans.last.assign(static_cast<size_t>(mask.num_rows), -1);
  for (int64_t r = 0; r < mask.num_rows; ++r) {
    if (mask.row_begin(r) == mask.row_end(r)) continue;
    spans.first[static_cast<size_t>(r)] = mask.begin[static_cast<size_t>(mask.row_begin(r))];
    spans.last[static_cast<size_t>(r)] = mask.end[static_cast<size_t>(mask.row_end(r)) - 1] - 1;
  }
  return spans;
}

namespace {

struct TileSpan {
  int64_t first = 0, last = -1;  // inner tiles [first, last]; empty when last < first
  bool empty() const { return last < first; }
  bool holds(int64_t tile) const { return first <= tile && tile <= last; }
};

// Adds `value` over the tiles of `span` to a difference array.
void add_over(std::vector<int64_t>& difference, const TileSpan& span, int64_t value) {
  if (span.empty()) return;
  difference[static_cast<size_t>(span.first)] += value;
  difference[static_cast<size_t>(span.last) + 1] -= value;
}

// The tiles of `a` outside `b` (one or two spans), over a difference array.
void add_outside(std::vector<int64_t>& difference, const TileSpan& a, const TileSpan& b, int64_t value) {
  if (b.empty() || b.last < a.first || b.first > a.last) {
    add_over(difference, a, value);
    return;
  }
  add_over(difference, {a.first, std::min(a.last, b.first - 1)}, value);
  add_over(difference, {std::max(a.first, b.last + 1), a.last}, value);
}

TileSpan intersect(const TileSpan& a, const TileSpan& b) { return {std::max(a.first, b.first), std::min(a.last, b.last)}; }

}  // namespace

NestEstimate estimate_nest(const HeadShape& shape, FlashNest nest, const NestTiles& tiles,
                           const MaskSpans& spans) {
  const int64_t n_q = static_cast<int64_t>(spans.first.size()), n_k = spans.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const bool keys_outer = nest == FlashNest::dkdv || nest == FlashNest::fused_dkdv;
  const int64_t block_q = keys_outer ? tiles.inner : tiles.outer;
  const int64_t block_k = keys_outer ? tiles.outer : tiles.inner;
  // Words per row of the two sides (flash.hpp's word counts): Q (forward) or Q, dO, LSE, D (and
  // dQ read and written with dQ in the dK/dV pass); K, V.
  const int64_t query_words = nest == FlashNest::forward ? d : nest == FlashNest::fused_dkdv ? 3 * d + e + 2 : d + e + 2;
  const int64_t key_words = d + e;
  NestEstimate estimate;
  estimate.bit_words = (tiles.outer * tiles.inner + 63) / 64;
  estimate.flops_per_pair = flash_flops_per_pair(shape, nest);
  // Per query tile, the key tiles it visits (`touched`) and those every one of its rows covers whole
  // (`full`); the list of a query tile is then at most three runs: partial, full, partial. The
  // dK/dV nest's lists run over the query tiles of each key tile: a difference array counts, per
  // key tile, the query tiles visiting it (`key_visits`) and the runs they form (`key_runs`: a run
  // starts where a query tile visits it and the one before does not, or where the two differ in kind).
  const size_t num_key_tiles = keys_outer ? static_cast<size_t>(num_tiles(n_k, block_k)) + 1 : 0;
  std::vector<int64_t> key_visits(num_key_tiles, 0), key_runs(num_key_tiles, 0);
  TileSpan prev_touched, prev_full;
  for (int64_t q0 = 0; q0 < n_q; q0 += block_q) {
    const int64_t rows = std::min(block_q, n_q - q0);
    int64_t first = n_k, last = -1;  // the span of the tile's attended keys
    TileSpan full{0, INT64_MAX};     // the key tiles every row covers whole
    for (int64_t r = q0; r < q0 + rows; ++r) {
      const int64_t row_first = spans.first[static_cast<size_t>(r)], row_last = spans.last[static_cast<size_t>(r)];
      first = std::min(first, row_first);
      last = std::max(last, row_last);
      const int64_t whole_first = (row_first + block_k - 1) / block_k;
      const int64_t whole_last = row_last + 1 == n_k ? (n_k - 1) / block_k : (row_last + 1) / block_k - 1;
      full = row_last < 0 ? TileSpan{} : intersect(full, {whole_first, whole_last});
    }
    if (!keys_outer) estimate.words += 3;  // the list header, read for every query tile
    const TileSpan touched = last < 0 ? TileSpan{} : TileSpan{first / block_k, last / block_k};
    if (keys_outer) {
      add_outside(key_runs, touched, prev_touched, 1);  // runs that start at this query tile
      const TileSpan both = intersect(touched, prev_touched);
      if (!both.empty()) {  // a kind change against the query tile before starts a run
        add_outside(key_runs, intersect(both, full), prev_full, 1);
        add_outside(key_runs, intersect(both, prev_full), full, 1);
      }
    }
    prev_touched = touched;
    prev_full = full;
    if (touched.empty()) continue;
    const int64_t cols = std::min((touched.last + 1) * block_k, n_k) - touched.first * block_k;
    const int64_t visited = touched.last - touched.first + 1;  // (query tile, key tile) pairs
    estimate.pairs += rows * cols;
    estimate.visited += visited;
    if (keys_outer) {
      estimate.words += visited * rows * query_words;  // Q, dO, LSE, D per pair
      add_over(key_visits, touched, 1);
    } else {
      const TileSpan inside = intersect(full, touched);
      const int64_t runs = inside.empty() ? 1 : 1 + (inside.first > touched.first) + (inside.last < touched.last);
      estimate.words += rows * query_words + cols * key_words + 2 * runs;  // + the list's runs
    }
  }
  int64_t open = 0, runs = 0;  // dK/dV: the query tiles' spans covering key tile kt, and their runs
  for (int64_t kt = 0; kt + 1 < static_cast<int64_t>(key_visits.size()); ++kt) {
    open += key_visits[static_cast<size_t>(kt)];
    runs += key_runs[static_cast<size_t>(kt)];
    estimate.words += 3 + 2 * runs + (open > 0 ? tile_rows(n_k, block_k, kt) * key_words : 0);  // header, runs, K, V
  }
  return estimate;
}

}  // namespace flash_detail

namespace {

using flash_detail::FlashNest;
using flash_detail::NestEstimate;
using flash_detail::NestTiles;

// The smallest outer tile a mask may ask for (flash_tile_choice.hpp: why 32).
constexpr int64_t kSmallestOuter = 32;

struct Candidate {
  NestTiles tiles;
  NestEstimate estimate;
};

// flash_tiles()' tiles for time for the nest first, then those with the outer tile limited to 32,
// 48, 64, 96, ... (x 2 every other step) below it, the largest first.
std::vector<Candidate> candidates(const HeadShape& shape, int64_t cache_words, FlashNest nest,
                                  const flash_detail::MaskSpans& spans) {
  const auto masking = FlashMasking::block_sparse;
  std::vector<Candidate> out;
  const NestTiles own = flash_detail::nest_tiles(shape, cache_words, nest, masking, INT64_MAX, PlanObjective::time);
  out.push_back({own, flash_detail::estimate_nest(shape, nest, own, spans)});
  std::vector<int64_t> limits;
  for (int64_t limit = kSmallestOuter; limit < own.outer; limit = limit % 3 == 0 ? limit / 3 * 4 : limit / 2 * 3) {
    limits.push_back(limit);
  }
  for (auto limit = limits.rbegin(); limit != limits.rend(); ++limit) {
    const NestTiles tiles = flash_detail::nest_tiles(shape, cache_words, nest, masking, *limit, PlanObjective::time);
    out.push_back({tiles, flash_detail::estimate_nest(shape, nest, tiles, spans)});
  }
  return out;
}

// The words of a pass that no tile changes (flash.hpp's formulas): the outputs written, and the
// backward's D pre-pass reads.
int64_t fixed_words(const HeadShape& s, Pass pass) {
  const int64_t d = s.head_dim, e = s.head_dim_v;
  if (pass == Pass::forward) return s.seqlen_q * (e + 1);
  const int64_t delta_rows = s.seqlen_k > 0 ? s.seqlen_q : 0;
  return delta_rows * (2 * e + 1) + s.seqlen_k * (d + e) + s.seqlen_q * d;
}

}  // namespace

FlashTiles flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, Pass pass,
                                const flash_detail::MaskSpans& spans, int64_t max_words) {
  FlashTiles tiles = flash_tiles(shape, cache_words, pass, FlashMasking::block_sparse, PlanObjective::time);  // checks M
  if (static_cast<int64_t>(spans.first.size()) != shape.seqlen_q || spans.seqlen_k != shape.seqlen_k) {
    fail("flash_tiles_for_mask: the mask is ", spans.first.size(), " x ", spans.seqlen_k, ", the problem ",
         shape.seqlen_q, " x ", shape.seqlen_k);
  }
  const int64_t budget = max_words - fixed_words(shape, pass);
  // The outer nest (forward or dQ) against every candidate of the other (dK/dV; one empty
  // candidate in the forward): the cheapest pair within the budget, the first found on a tie.
  // Candidate 0 of each is flash_tiles()' own, always allowed.
  const std::vector<Candidate> first =
      candidates(shape, cache_words, pass == Pass::forward ? FlashNest::forward : FlashNest::dq, spans);
  const std::vector<Candidate> second =
      pass == Pass::forward ? std::vector<Candidate>{Candidate{}} : candidates(shape, cache_words, FlashNest::dkdv, spans);
  size_t best_first = 0, best_second = 0;
  int64_t best_cost = first[0].estimate.cost() + second[0].estimate.cost();
  for (size_t i = 0; i < first.size(); ++i) {
    for (size_t j = 0; j < second.size(); ++j) {
      const int64_t cost = first[i].estimate.cost() + second[j].estimate.cost();
      const int64_t words = first[i].estimate.words_bound() + second[j].estimate.words_bound();
      if (cost < best_cost && words <= budget) {
        best_cost = cost;
        best_first = i;
        best_second = j;
      }
    }
  }
  tiles.block_q = first[best_first].tiles.outer;
  tiles.block_k = first[best_first].tiles.inner;
  if (pass == Pass::backward) {
    tiles.dkdv_block_k = second[best_second].tiles.outer;
    tiles.dkdv_block_q = second[best_second].tiles.inner;
  }
  return tiles;
}

FlashTiles fused_flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, const flash_detail::MaskSpans& spans) {
  FlashTiles tiles = fused_flash_tiles(shape, cache_words, FlashMasking::block_sparse, PlanObjective::time);  // checks M
  const std::vector<Candidate> options = candidates(shape, cache_words, FlashNest::fused_dkdv, spans);
  size_t best = 0;
  for (size_t i = 1; i < options.size(); ++i) {
    if (options[i].estimate.cost() < options[best].estimate.cost()) best = i;
  }
  tiles.dkdv_block_k = options[best].tiles.outer;
  tiles.dkdv_block_q = options[best].tiles.inner;
  return tiles;
}

template <typename Index>
FlashTiles flash_tiles_for_mask(const HeadShape& shape, int64_t cache_words, Pass pass,
                                const sparse_formats::CsrPatternView<Index>& mask, int64_t max_words) {
  flash_tiles(shape, cache_words, pass, FlashMasking::block_sparse);  // checks M before the shape
  if (mask.num_rows != shape.seqlen_q || mask.num_cols != shape.seqlen_k) {
    fail("flash_tiles_for_mask: the mask is ", mask.num_rows, " x ", mask.num_cols, ", the problem ",
         shape.seqlen_q, " x ", shape.seqlen_k);
  }
  return flash_tiles_for_mask(shape, cache_words, pass, flash_detail::mask_spans(mask), max_words);
}

#define SPATTN_INSTANTIATE(Index)                                                                    \
  template FlashTiles flash_tiles_for_mask<Index>(const HeadShape&, int64_t, Pass,                   \
                                                  const sparse_formats::CsrPatternView<Index>&, int64_t); \
  template flash_detail::MaskSpans flash_detail::mask_spans<Index>(                                 \
      const sparse_formats::CsrPatternView<Index>&);
SPATTN_INSTANTIATE(int32_t)
SPATTN_INSTANTIATE(int64_t)
#undef SPATTN_INSTANTIATE

}  // namespace spattn::schedules
