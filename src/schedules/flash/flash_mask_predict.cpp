// The exact words moved by the flash schedule, dense (flash_tiles.cpp's O(1) formulas) or over a
// FlashMask (docs/block_sparse.md, "Exact word counts"): sums over the mask's tile lists, O(1) per
// run of tiles (O(line_words) for lines), never running the schedule.
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "schedules/common/dense_lines.hpp"

#include <algorithm>
#include <vector>

namespace spattn::schedules {
namespace {

using flash_detail::tile_rows;

// What one direction's lists make the schedule move, in rows and words.
struct ListSums {
  int64_t outer_rows_visiting = 0;  // rows of the outer tiles whose list is not empty
  int64_t inner_rows_visited = 0;   // over every list, the rows of the inner tiles it holds
  int64_t index_reads = 0;          // 3 per outer tile + 1 per entry + bit_words per partial tile
};

// The rows of the inner tiles of run r of `lists` (the last inner tile may be short; only a run
// that ends the sequence holds it).
int64_t run_rows(const FlashTileLists& lists, int64_t r) {
  const int64_t row0 = lists.run_first(r) * lists.inner_block;
  return std::min(lists.run_count(r) * lists.inner_block, lists.inner_rows - row0);
}

ListSums sum_lists(const FlashTileLists& lists) {
  ListSums sums;
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    const int64_t begin = lists.run_ptr[static_cast<size_t>(i)];
    const int64_t end = lists.run_ptr[static_cast<size_t>(i) + 1];
    if (end == begin) continue;
    sums.outer_rows_visiting += tile_rows(lists.outer_rows, lists.outer_block, i);
    for (int64_t r = begin; r < end; ++r) sums.inner_rows_visited += run_rows(lists, r);
  }
  sums.index_reads = 3 * lists.num_outer_tiles() + 2 * lists.num_runs() + lists.num_partial() * lists.bit_words;
  return sums;
}

// The index lines a TileWalker reads walking every outer tile's list: per outer tile the run
// run_ptr[i .. i + 1] and partial_ptr[i], its run words in chunks of kFlashListChunk, and per
// partial tile its bit set.
int64_t list_index_lines(const FlashTileLists& lists, int64_t line_words) {
  int64_t lines = lists.num_partial() * io::segment_lines(0, lists.bit_words, line_words);
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    lines += io::segment_lines(i, 2, line_words) + 1;
    const int64_t end = 2 * lists.run_ptr[static_cast<size_t>(i) + 1];
    for (int64_t p = 2 * lists.run_ptr[static_cast<size_t>(i)]; p < end; p += kFlashListChunk) {
      lines += io::segment_lines(p, std::min(kFlashListChunk, end - p), line_words);
    }
  }
  return lines;
}

// Calls visit(outer tile's first row, its rows, whether its list is not empty) per outer tile and
// inner(first tile, count) per run of its list.
template <typename Outer, typename Inner>
void walk_lists(const FlashTileLists& lists, Outer&& outer, Inner&& inner) {
  for (int64_t i = 0; i < lists.num_outer_tiles(); ++i) {
    const int64_t begin = lists.run_ptr[static_cast<size_t>(i)];
    const int64_t end = lists.run_ptr[static_cast<size_t>(i) + 1];
    outer(i * lists.outer_block, tile_rows(lists.outer_rows, lists.outer_block, i), end > begin);
    for (int64_t r = begin; r < end; ++r) inner(lists.run_first(r), lists.run_count(r));
  }
}

// How many key tiles visit each query tile of the dK/dV pass's lists (dQ's terms with dQ in the
// dK/dV pass), by a difference array over the runs: O(runs + query tiles).
std::vector<int64_t> visits_per_query_tile(const FlashTileLists& key_cols) {
  std::vector<int64_t> visits(static_cast<size_t>(key_cols.num_inner_tiles()) + 1, 0);
  for (int64_t r = 0; r < key_cols.num_runs(); ++r) {
    ++visits[static_cast<size_t>(key_cols.run_first(r))];
    --visits[static_cast<size_t>(key_cols.run_first(r) + key_cols.run_count(r))];
  }
  for (size_t t = 1; t < visits.size(); ++t) visits[t] += visits[t - 1];
  visits.pop_back();
  return visits;
}

// The moves of dQ with dQ in the dK/dV pass, per query tile of `cq` rows with v visits: read back
// v - 1 times, written v times (a tile nobody visits: once, as 0). cost(q0, rows) is one move's.
template <typename Cost>
IoCount fused_dq_moves(const FlashTileLists& key_cols, int64_t n_q, int64_t cq, Cost&& cost) {
  IoCount moves;
  const std::vector<int64_t> visits = visits_per_query_tile(key_cols);
  for (int64_t t = 0; t < static_cast<int64_t>(visits.size()); ++t) {
    const int64_t one = cost(t * cq, tile_rows(n_q, cq, t));
    const int64_t v = visits[static_cast<size_t>(t)];
    moves.reads += std::max<int64_t>(v - 1, 0) * one;
    moves.writes += std::max<int64_t>(v, 1) * one;
  }
  return moves;
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
  const int64_t bk = tiles.block_k, n_k = shape.seqlen_k;
  walk_lists(
      mask->query_rows,
      [&](int64_t q0, int64_t rows, bool visits) {
        if (visits) lines.values.reads += dense_rows_lines(q0, rows, d, L);                        // Q
        lines.values.writes += dense_rows_lines(q0, rows, e, L) + io::segment_lines(q0, rows, L);  // O, LSE
      },
      [&](int64_t first, int64_t count) {
        lines.values.reads += dense_tile_run_lines(first, count, bk, n_k, d, L) + dense_tile_run_lines(first, count, bk, n_k, e, L);
      });
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
  const int64_t cq = tiles.dkdv_block_q, bk = tiles.block_k;
  walk_lists(
      mask->key_cols,
      [&](int64_t k0, int64_t rows, bool visits) {
        const int64_t kv = dense_rows_lines(k0, rows, d, L) + dense_rows_lines(k0, rows, e, L);
        if (visits) v.reads += kv;
        v.writes += kv;
      },
      [&](int64_t first, int64_t count) {
        v.reads += dense_tile_run_lines(first, count, cq, n_q, d, L) + dense_tile_run_lines(first, count, cq, n_q, e, L) +
                   2 * dense_tile_run_lines(first, count, cq, n_q, 1, L);
      });
  lines.indices.reads = list_index_lines(mask->key_cols, L);
  if (tiles.dq_in_dkdv) {  // dQ read back and written at the visits
    v += fused_dq_moves(mask->key_cols, n_q, cq,
                        [&](int64_t q0, int64_t rows) { return dense_rows_lines(q0, rows, d, L); });
    return lines;
  }
  // dQ pass: Q, dO, LSE, D per query tile that visits; K, V per visit; dQ written.
  walk_lists(
      mask->query_rows,
      [&](int64_t q0, int64_t rows, bool visits) {
        if (visits) {
          v.reads += dense_rows_lines(q0, rows, d, L) + dense_rows_lines(q0, rows, e, L) + 2 * io::segment_lines(q0, rows, L);
        }
        v.writes += dense_rows_lines(q0, rows, d, L);
      },
      [&](int64_t first, int64_t count) {
        v.reads += dense_tile_run_lines(first, count, bk, n_k, d, L) + dense_tile_run_lines(first, count, bk, n_k, e, L);
      });
  lines.indices.reads += list_index_lines(mask->query_rows, L);
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
  const int64_t delta_rows = n_k > 0 ? n_q : 0;       // the D pre-pass runs whenever keys exist
  if (tiles.dq_in_dkdv) {
    words.values.reads = delta_rows * 2 * e                           // O, dO
                         + cols.outer_rows_visiting * (d + e)         // K, V per key tile
                         + cols.inner_rows_visited * (d + e + 2);     // Q, dO, LSE, D
    words.values.writes = delta_rows + n_k * (d + e);                 // D, dK, dV
    words.values += fused_dq_moves(mask->key_cols, n_q, tiles.dkdv_block_q,
                                   [&](int64_t, int64_t rows) { return rows * d; });
    words.indices.reads = cols.index_reads;
    return words;
  }
  const ListSums rows = sum_lists(mask->query_rows);  // dQ pass: query tile -> key tiles
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
