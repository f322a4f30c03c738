#include "schedules/flash/flash_split.hpp"

#include "cpu/workers.hpp"

#include <algorithm>

namespace spattn::schedules::flash_detail {

int64_t visited_inner_rows(const FlashTileLists* lists, int64_t outer, int64_t inner_rows) {
  if (lists == nullptr) return inner_rows;
  int64_t rows = 0;
  for (int64_t r = lists->run_ptr[static_cast<size_t>(outer)]; r < lists->run_ptr[static_cast<size_t>(outer) + 1]; ++r) {
    const int64_t begin = lists->run_first(r) * lists->inner_block;
    const int64_t end = std::min((lists->run_first(r) + lists->run_count(r)) * lists->inner_block, inner_rows);
    rows += end - begin;
  }
  return rows;
}

namespace {

// Every item, in order: one worker's share needs no costs.
std::vector<std::vector<int64_t>> every_item(int64_t count) {
  std::vector<int64_t> items(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) items[static_cast<size_t>(i)] = i;
  return {items};
}

// Appends, for every head, each outer tile's work: its rows x the inner rows it visits x
// per_pair, plus its rows x per_row for what it loads and stores once.
void append_tile_costs(std::vector<int64_t>& costs, int64_t heads, int64_t outer_rows, int64_t outer_block,
                       int64_t inner_rows, const FlashTileLists* lists, int64_t per_pair, int64_t per_row) {
  const int64_t tiles = num_tiles(outer_rows, outer_block);
  std::vector<int64_t> per_tile(static_cast<size_t>(tiles));
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t rows = tile_rows(outer_rows, outer_block, t);
    per_tile[static_cast<size_t>(t)] = rows * (visited_inner_rows(lists, t, inner_rows) * per_pair + per_row);
  }
  for (int64_t h = 0; h < heads; ++h) costs.insert(costs.end(), per_tile.begin(), per_tile.end());
}

// The items of one loop nest (every head's outer tiles) split over `workers` by their work.
std::vector<std::vector<int64_t>> split_nest(int64_t heads, int64_t outer_rows, int64_t outer_block,
                                             int64_t inner_rows, const FlashTileLists* lists, int64_t per_pair,
                                             int64_t per_row, int workers) {
  if (workers <= 1) return every_item(heads * num_tiles(outer_rows, outer_block));
  std::vector<int64_t> costs;
  append_tile_costs(costs, heads, outer_rows, outer_block, inner_rows, lists, per_pair, per_row);
  return cpu::split_by_cost(costs, workers);
}

}  // namespace

std::vector<std::vector<int64_t>> forward_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                const FlashMask* mask, int workers) {
  const int64_t words = shape.head_dim + shape.head_dim_v;
  return split_nest(heads, shape.seqlen_q, tiles.block_q, shape.seqlen_k, mask != nullptr ? &mask->query_rows : nullptr,
                    words, words, workers);
}

std::vector<std::vector<int64_t>> gradient_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                 const FlashMask* mask, int workers) {
  if (workers <= 1) {
    return every_item(heads * (num_tiles(shape.seqlen_k, tiles.dkdv_block_k) + num_tiles(shape.seqlen_q, tiles.block_q)));
  }
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  std::vector<int64_t> costs;
  append_tile_costs(costs, heads, shape.seqlen_k, tiles.dkdv_block_k, shape.seqlen_q,
                    mask != nullptr ? &mask->key_cols : nullptr, 2 * (d + e), 2 * (d + e));
  append_tile_costs(costs, heads, shape.seqlen_q, tiles.block_q, shape.seqlen_k,
                    mask != nullptr ? &mask->query_rows : nullptr, 2 * d + e, 2 * d + e);
  return cpu::split_by_cost(costs, workers);
}

std::vector<std::vector<int64_t>> fused_gradient_split(const HeadShape& shape, int64_t heads, const FlashTiles& tiles,
                                                       const FlashMask* mask, int workers) {
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  return split_nest(heads, shape.seqlen_k, tiles.dkdv_block_k, shape.seqlen_q, mask != nullptr ? &mask->key_cols : nullptr,
                    3 * d + 2 * e, 2 * (d + e), workers);
}

}  // namespace spattn::schedules::flash_detail
