// The exact words moved by the flash schedule, dense (flash_tiles.cpp's O(1) formulas) or over a
// FlashMask (docs/block_sparse.md, "Exact word counts"): sums over the mask's tile lists, O(1) per
// outer tile, never running the schedule.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/dense_lines.hpp"

#include <algorithm>

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

// The index lines a TileWalker reads walking every outer tile's list: per outer tile the run
// tile_ptr[i .. i + 1] and partial_ptr[i], its entries in runs of kFlashListChunk, and per
// partial tile its bit set.
int64_t list_index_lines(const FlashTileLists& lists, int64_t line_words) {
  int64_t lines = lists.num_partial() * io::segment_lines(0, lists.bit_words, line_words);
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    lines += io::segment_lines(i, 2, line_words) + 1;
    const int64_t end = lists.tile_ptr[static_cast<size_t>(i) + 1];
    for (int64_t p = lists.tile_ptr[static_cast<size_t>(i)]; p < end; p += kFlashListChunk) {
      lines += io::segment_lines(p, std::min(kFlashListChunk, end - p), line_words);
    }
  }
  return lines;
}

// Calls visit(outer tile, its first row, its rows, number of visited inner tiles) per outer tile
// and inner(first row, rows) per visited inner tile.
template <typename Outer, typename Inner>
void walk_lists(const FlashTileLists& lists, Outer&& outer, Inner&& inner) {
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    const int64_t begin = lists.tile_ptr[static_cast<size_t>(i)];
    const int64_t end = lists.tile_ptr[static_cast<size_t>(i) + 1];
    outer(i * lists.outer_block, tile_rows(lists.outer_rows, lists.outer_block, i), end - begin);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t tile = lists.entries[static_cast<size_t>(p)] / 2;
      inner(tile * lists.inner_block, tile_rows(lists.inner_rows, lists.inner_block, tile));
    }
  }
}

}  // namespace

FlashWords predict_flash_forward_lines(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                       int64_t line_words) {
  FlashWords lines;
  lines.values = predict_dense_forward_lines(shape, tiles, line_words);  // validates
  if (mask == nullptr) return lines;
  flash_detail::check_mask("predict_flash_forward_lines", mask, shape, tiles, Pass::forward);
  const int64_t d = shape.head_dim, e = shape.head_dim_v, L = line_words;
  lines.values = {};
  walk_lists(
      mask->query_rows,
      [&](int64_t q0, int64_t rows, int64_t visits) {
        if (visits > 0) lines.values.reads += dense_rows_lines(q0, rows, d, L);                  // Q
        lines.values.writes += dense_rows_lines(q0, rows, e, L) + io::segment_lines(q0, rows, L);  // O, LSE
      },
      [&](int64_t k0, int64_t rows) { lines.values.reads += dense_rows_lines(k0, rows, d, L) + dense_rows_lines(k0, rows, e, L); });
  lines.indices.reads = list_index_lines(mask->query_rows, L);
  return lines;
}

FlashWords predict_flash_backward_lines(const HeadShape& shape, const FlashTiles& tiles, const FlashMask* mask,
                                        int64_t line_words) {
  FlashWords lines;
  lines.values = predict_dense_backward_lines(shape, tiles, line_words);  // validates
  if (mask == nullptr) return lines;
  flash_detail::check_mask("predict_flash_backward_lines", mask, shape, tiles, Pass::backward);
  const int64_t n_q = shape.seqlen_q, n_k = shape.seqlen_k;
  const int64_t d = shape.head_dim, e = shape.head_dim_v, L = line_words;
  IoCount& v = lines.values;
  v = {};
  // The D pre-pass, per query tile of block_q rows, whenever keys exist: O, dO read, D written.
  if (n_k > 0) {
    for (int64_t q0 = 0; q0 < n_q; q0 += tiles.block_q) {
      const int64_t rows = std::min(tiles.block_q, n_q - q0);
      v.reads += 2 * dense_rows_lines(q0, rows, e, L);
      v.writes += io::segment_lines(q0, rows, L);
    }
  }
  // dK/dV pass: K, V per key tile that visits; Q, dO, LSE, D per visit; dK, dV written.
  walk_lists(
      mask->key_cols,
      [&](int64_t k0, int64_t rows, int64_t visits) {
        const int64_t kv = dense_rows_lines(k0, rows, d, L) + dense_rows_lines(k0, rows, e, L);
        if (visits > 0) v.reads += kv;
        v.writes += kv;
      },
      [&](int64_t q0, int64_t rows) {
        v.reads += dense_rows_lines(q0, rows, d, L) + dense_rows_lines(q0, rows, e, L) + 2 * io::segment_lines(q0, rows, L);
      });
  // dQ pass: Q, dO, LSE, D per query tile that visits; K, V per visit; dQ written.
  walk_lists(
      mask->query_rows,
      [&](int64_t q0, int64_t rows, int64_t visits) {
        if (visits > 0) {
          v.reads += dense_rows_lines(q0, rows, d, L) + dense_rows_lines(q0, rows, e, L) + 2 * io::segment_lines(q0, rows, L);
        }
        v.writes += dense_rows_lines(q0, rows, d, L);
      },
      [&](int64_t k0, int64_t rows) { v.reads += dense_rows_lines(k0, rows, d, L) + dense_rows_lines(k0, rows, e, L); });
  lines.indices.reads = list_index_lines(mask->key_cols, L) + list_index_lines(mask->query_rows, L);
  return lines;
}

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
