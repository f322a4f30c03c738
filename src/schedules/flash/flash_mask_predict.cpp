// The exact words moved by the flash schedule, dense (flash_tiles.cpp's O(1) formulas) or over a
// FlashMask (docs/block_sparse.md, "Exact word counts"): sums over the mask's tile lists, O(1) per
// outer tile, never running the schedule.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"

namespace spattn::schedules {
namespace {

using flash_detail::tile_rows;

// What one direction's lists make the schedule move, in rows and words.
struct ListSums {
  int64_t outer_rows_visiting = 0;  // rows of the outer tiles whose list is not empty
  int64_t inner_rows_visited = 0;   // over every list, the rows of the inner tiles it holds
  int64_t index_reads = 0;          // 3 per outer tile + 1 per entry + bit_words per partial tile
};

ListSums sum_lists(const FlashTileLists& lists) {
  ListSums sums;
  const int64_t num_outer = lists.num_outer_tiles();
  const int64_t last_inner = lists.num_inner_tiles() - 1;
  // Only the last inner tile can be short; lists are sorted, so only a list's last entry can be it.
  const int64_t last_short =
      last_inner < 0 ? 0 : lists.inner_block - tile_rows(lists.inner_rows, lists.inner_block, last_inner);
  for (int64_t i = 0; i < num_outer; ++i) {
    const int64_t begin = lists.tile_ptr[static_cast<size_t>(i)];
    const int64_t end = lists.tile_ptr[static_cast<size_t>(i) + 1];
    if (end == begin) continue;
    sums.outer_rows_visiting += tile_rows(lists.outer_rows, lists.outer_block, i);
    sums.inner_rows_visited += (end - begin) * lists.inner_block;
    if (lists.entries[static_cast<size_t>(end) - 1] / 2 == last_inner) {
      sums.inner_rows_visited -= last_short;
    }
  }
  sums.index_reads = 3 * num_outer + lists.num_stored() + lists.num_partial() * lists.bit_words;
  return sums;
}

}  // namespace

FlashWords predict_flash_forward_words(const HeadShape& shape, const FlashTiles& tiles,
                                       const FlashMask* mask) {
  FlashWords words;
  words.values = flash_detail::predict_dense_forward(shape, tiles);  // validates shape and tiles
  if (mask == nullptr) return words;
  flash_detail::check_mask("predict_flash_forward", mask, shape, tiles, Pass::forward);
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const ListSums rows = sum_lists(mask->query_rows);
  // Q once per query tile that visits a key tile; K, V once per visited (query tile, key tile).
  words.values.reads = rows.outer_rows_visiting * d + rows.inner_rows_visited * (d + e);
  words.values.writes = shape.seqlen_q * (e + 1);  // O, LSE: every row, attended or not
  words.indices.reads = rows.index_reads;
  return words;
}

FlashWords predict_flash_backward_words(const HeadShape& shape, const FlashTiles& tiles,
                                        const FlashMask* mask) {
  FlashWords words;
  words.values = flash_detail::predict_dense_backward(shape, tiles);  // validates shape and tiles
  if (mask == nullptr) return words;
  flash_detail::check_mask("predict_flash_backward", mask, shape, tiles, Pass::backward);
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  const ListSums cols = sum_lists(mask->key_cols);    // dK/dV pass: key tile -> query tiles
  const ListSums rows = sum_lists(mask->query_rows);  // dQ pass: query tile -> key tiles
  const int64_t delta_rows = n_k > 0 ? n_q : 0;       // the D pre-pass runs whenever keys exist
  words.values.reads = delta_rows * 2 * e                                   // O, dO
                       + cols.outer_rows_visiting * (d + e)                 // K, V per key tile
                       + cols.inner_rows_visited * (d + e + 2)              // Q, dO, LSE, D
                       + rows.outer_rows_visiting * (d + e + 2)             // Q, dO, LSE, D
                       + rows.inner_rows_visited * (d + e);                 // K, V
  words.values.writes = delta_rows + n_k * (d + e) + n_q * d;              // D, dK, dV, dQ
  words.indices.reads = cols.index_reads + rows.index_reads;
  return words;
}

IoCount predict_flash_forward(const HeadShape& shape, const FlashTiles& tiles,
                              const FlashMask* mask) {
  return predict_flash_forward_words(shape, tiles, mask).total();
}

IoCount predict_flash_backward(const HeadShape& shape, const FlashTiles& tiles,
                               const FlashMask* mask) {
  return predict_flash_backward_words(shape, tiles, mask).total();
}

}  // namespace spattn::schedules
