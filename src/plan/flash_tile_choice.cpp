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

NestEstimate estimate_nest(const HeadShape& shape, FlashNest nest, const NestTiles& tiles,
                           const MaskSpans& spans) {
  const int64_t n_q = static_cast<int64_t>(spans.first.size()), n_k = spans.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const bool keys_outer = nest == FlashNest::dkdv;
  const int64_t block_q = keys_outer ? tiles.inner : tiles.outer;
  const int64_t block_k = keys_outer ? tiles.outer : tiles.inner;
  // Words per row of the two sides (flash.hpp's word counts): Q (forward) or Q, dO, LSE, D; K, V.
  const int64_t query_words = nest == FlashNest::forward ? d : d + e + 2;
  const int64_t key_words = d + e;
  NestEstimate estimate;
  estimate.bit_words = (tiles.outer * tiles.inner + 63) / 64;
  estimate.flops_per_pair = flash_flops_per_pair(shape, nest);
  // dK/dV: which key tiles visit anything (their K, V move once each), as a difference array.
  std::vector<int64_t> key_visits(keys_outer ? static_cast<size_t>(num_tiles(n_k, block_k)) + 1 : 0, 0);
  for (int64_t q0 = 0; q0 < n_q; q0 += block_q) {
    const int64_t rows = std::min(block_q, n_q - q0);
    int64_t first = n_k, last = -1;  // the span of the tile's attended keys
    for (int64_t r = q0; r < q0 + rows; ++r) {
      first = std::min(first, spans.first[static_cast<size_t>(r)]);
      last = std::max(last, spans.last[static_cast<size_t>(r)]);
    }
    if (!keys_outer) estimate.words += 3;  // the list header, read for every query tile
    if (last < 0) continue;
    const int64_t k_first = first / block_k, k_last = last / block_k;
    const int64_t cols = std::min((k_last + 1) * block_k, n_k) - k_first * block_k;
    const int64_t visited = k_last - k_first + 1;  // (query tile, key tile) pairs
    estimate.pairs += rows * cols;
    estimate.visited += visited;
    if (keys_outer) {
      estimate.words += visited * (rows * query_words + 1);  // Q, dO, LSE, D per pair; the entry
      ++key_visits[static_cast<size_t>(k_first)];
      --key_visits[static_cast<size_t>(k_last) + 1];
    } else {
      estimate.words += rows * query_words + cols * key_words + visited;  // + the list's entries
    }
  }
  int64_t open = 0;  // dK/dV: the query tiles' spans covering key tile kt
  for (int64_t kt = 0; kt + 1 < static_cast<int64_t>(key_visits.size()); ++kt) {
    open += key_visits[static_cast<size_t>(kt)];
    estimate.words += 3 + (open > 0 ? tile_rows(n_k, block_k, kt) * key_words : 0);  // header, K, V
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

// flash_tiles()' tiles for the nest first, then those with the outer tile limited to 32, 48, 64,
// 96, ... (x 2 every other step) below it, the largest first.
std::vector<Candidate> candidates(const HeadShape& shape, int64_t cache_words, FlashNest nest,
                                  const flash_detail::MaskSpans& spans) {
  const auto masking = FlashMasking::block_sparse;
  std::vector<Candidate> out;
  const NestTiles own = flash_detail::nest_tiles(shape, cache_words, nest, masking, INT64_MAX);
  out.push_back({own, flash_detail::estimate_nest(shape, nest, own, spans)});
  std::vector<int64_t> limits;
  for (int64_t limit = kSmallestOuter; limit < own.outer; limit = limit % 3 == 0 ? limit / 3 * 4 : limit / 2 * 3) {
    limits.push_back(limit);
  }
  for (auto limit = limits.rbegin(); limit != limits.rend(); ++limit) {
    const NestTiles tiles = flash_detail::nest_tiles(shape, cache_words, nest, masking, *limit);
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
  FlashTiles tiles = flash_tiles(shape, cache_words, pass, FlashMasking::block_sparse);  // checks M
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
