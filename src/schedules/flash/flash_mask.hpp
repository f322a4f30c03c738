// The block-sparse flash schedule's view of a mask (docs/block_sparse.md).
//
// A user's mask (intervals or element CSR, seqlen_q x seqlen_k) has whatever block structure the
// user thinks in; the flash tiles come from flash_tiles() (M and d only). A FlashMask re-blocks
// the mask once at the tiles' own granularity, tiles spanning or splitting the user's blocks
// freely:
//
//   query_rows  per query tile (block_q rows), the key tiles (block_k rows) holding an attended
//               pair: the forward and the backward's dQ pass walk these lists;
//   key_cols    per key tile (dkdv_block_k rows), the query tiles (dkdv_block_q rows) holding an
//               attended pair: the backward's dK/dV pass walks these (backward masks only).
//
// Each stored tile is full (every in-range pair attends: the element mask is skipped) or partial
// (its element bits are applied). The lists live in slow memory like any operand: the schedule
// moves every word of them it reads through FastMemory::load as io::Operand::mask,
// io::WordKind::index, and a TileWalker keeps them resident while used (counted toward M).
//
// A list is held as runs: consecutive inner tiles of one kind (full or partial) are one run, so a
// causal or banded mask costs a few runs per outer tile, not a word per tile (O(n / block) words
// where tile-by-tile lists hold O((n / block)^2)).
//
// Word convention (docs/block_sparse.md, "Index words"): one word = one index or one 64-bit
// bit-set word. Per list visit the walker reads the header (run_ptr[i], run_ptr[i + 1],
// partial_ptr[i]: 3 words), each run once (2 words: the first tile and the full/partial flag
// packed as 2 * tile + partial, then the number of tiles), and per partial tile its bit set
// (ceil(outer * inner / 64) words).
#pragma once

#include "schedules/flash/flash.hpp"

#include <spattn/io.hpp>

#include <sparse_formats/csr.hpp>
#include <sparse_formats/intervals.hpp>

#include <cstdint>
#include <vector>

namespace spattn::schedules {

// One direction of a FlashMask: for each outer tile, the sorted runs of inner tiles it visits.
struct FlashTileLists {
  int64_t outer_rows = 0;   // the sequence length the outer tiles cover (element rows)
  int64_t inner_rows = 0;   // the sequence length the inner tiles cover
  int64_t outer_block = 1;  // rows per outer tile (the last one may be shorter)
  int64_t inner_block = 1;  // rows per inner tile
  int64_t bit_words = 1;    // words per partial tile's bit set: ceil(outer_block inner_block / 64)
  // (num_outer_tiles + 1): the list of outer tile i is runs [run_ptr[i], run_ptr[i + 1]).
  std::vector<int64_t> run_ptr{0};
  // (num_outer_tiles + 1): partial tiles before outer tile i's list (its first bit set's row).
  std::vector<int64_t> partial_ptr{0};
  // (2 num_runs): per run, 2 * first inner tile + (1 if its tiles are partial), then its number of
  // tiles (>= 1); runs ascend within a list, and two runs of one kind never touch.
  std::vector<int64_t> runs;
  // (num_partial, bit_words), in list order: bit r * inner_block + c is element (r, c) of the
  // tile (r along the outer sequence, c along the inner one); bits beyond the edge are zero.
  std::vector<uint64_t> bits;
  int64_t stored = 0;       // tiles over all runs

  int64_t num_outer_tiles() const { return static_cast<int64_t>(run_ptr.size()) - 1; }
  int64_t num_inner_tiles() const { return flash_detail::num_tiles(inner_rows, inner_block); }
  int64_t num_runs() const { return static_cast<int64_t>(runs.size()) / 2; }
  int64_t num_stored() const { return stored; }
  int64_t num_partial() const { return partial_ptr.back(); }
  int64_t run_first(int64_t run) const { return runs[static_cast<size_t>(2 * run)] / 2; }
  bool run_partial(int64_t run) const { return runs[static_cast<size_t>(2 * run)] % 2 == 1; }
  int64_t run_count(int64_t run) const { return runs[static_cast<size_t>(2 * run) + 1]; }
  // Appends a run to the list being built (the list of the last outer tile started).
  void append_run(int64_t first, int64_t count, bool partial) {
    runs.push_back(2 * first + (partial ? 1 : 0));
    runs.push_back(count);
    stored += count;
  }
  // visit(inner tile, partial) for every tile of outer tile i's list, in order (O(tiles)).
  template <typename Visit>
  void for_each_tile(int64_t outer, Visit&& visit) const {
    for (int64_t r = run_ptr[static_cast<size_t>(outer)]; r < run_ptr[static_cast<size_t>(outer) + 1]; ++r) {
      for (int64_t t = run_first(r); t < run_first(r) + run_count(r); ++t) visit(t, run_partial(r));
    }
  }
  friend bool operator==(const FlashTileLists& a, const FlashTileLists& b) {
    return a.outer_rows == b.outer_rows && a.inner_rows == b.inner_rows && a.outer_block == b.outer_block &&
           a.inner_block == b.inner_block && a.bit_words == b.bit_words && a.run_ptr == b.run_ptr &&
           a.partial_ptr == b.partial_ptr && a.runs == b.runs && a.bits == b.bits && a.stored == b.stored;
  }
};

struct FlashMask {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  Pass pass = Pass::forward;
  FlashTiles tiles;           // the tiles it was built for
  FlashTileLists query_rows;  // (block_q x block_k) tiles, rows = query tiles
  FlashTileLists key_cols;    // (dkdv_block_k x dkdv_block_q) tiles, rows = key tiles; backward only
  int64_t nnz = 0;            // attended pairs of the element mask
};

// Builds the flash mask of `mask` (seqlen_q x seqlen_k, trusted structure: validate() data from
// outside first) for `pass` with `tiles`. Cost: O(nnz + seqlen_q + T_q T_k-touched) time through
// sparse_formats::csr_to_bsr_mask, once per pass (the backward also transposes its second
// re-blocking: O(stored tiles + partial bits)); memory O(runs + partial tiles * ceil(block area /
// 64)), never seqlen_q x seqlen_k. Throws InvalidArgument when the mask's shape is not seqlen_q x
// seqlen_k or a tile the pass uses is not positive.
template <typename Index>
FlashMask build_flash_mask(const sparse_formats::CsrPatternView<Index>& mask, int64_t seqlen_q,
                           int64_t seqlen_k, const FlashTiles& tiles, Pass pass);
// The same FlashMask from an interval mask (valid: sparse_formats::validate), by interval
// arithmetic per outer tile: O(intervals x log + runs + partial tiles' bits), never O(nnz) nor
// O(stored tiles). The backward's key lists come from the transposed intervals: pass
// `transposed` (sparse_formats::transpose(mask), kept by the caller across tilings) or nullptr
// to have it computed. Equal to build_flash_mask(intervals_to_csr(mask), ...).
FlashMask build_flash_mask(const sparse_formats::IntervalPattern& mask,
                           const sparse_formats::IntervalPattern* transposed, int64_t seqlen_q, int64_t seqlen_k,
                           const FlashTiles& tiles, Pass pass);

namespace flash_detail {

// Asserts that `mask` was built for this shape, pass and these tiles (the plan hands them out
// together, so a mismatch is a caller's bug). Nothing when mask == nullptr.
void check_mask(const char* what, const FlashMask* mask, const HeadShape& shape,
                const FlashTiles& tiles, Pass pass);

// The lists of an interval mask (valid) with outer tiles of outer_block rows along its rows and
// inner tiles of inner_block along its columns: per outer tile, the inner tiles some row reaches
// (the union of its rows' intervals' tile spans), of which those every row covers whole are full
// (the intersection of the rows' whole-tile spans), joined into runs; bits for the partial tiles
// only. O(intervals x log + runs + partial tiles' bits). Equal to the lists of the same mask's CSR.
FlashTileLists interval_lists(const sparse_formats::IntervalPattern& mask, int64_t outer_block, int64_t inner_block);

// A tile the walker hands out: its index and, for a partial tile, its bit set in fast memory.
struct VisitedTile {
  int64_t tile = 0;
  const uint64_t* bits = nullptr;  // nullptr: full tile (every in-range pair attends)
};

// Walks one loop nest's tile lists. Dense (lists == nullptr): every inner tile in order, nothing
// moved or resident. Masked: allocates the header (3 words), a chunk of runs (kFlashListChunk
// words) and one bit set (bit_words) from `fast` for its lifetime (flash_mask_resident_words), and
// moves each word of the lists it reads with fast.load (Operand::mask, WordKind::index).
//
//   if (walker.start(outer)) { load the outer tile; }
//   while (walker.more()) { const VisitedTile tile = walker.next(); ... }
class TileWalker {
 public:
  TileWalker(io::FastMemory& fast, const FlashTileLists* lists, int64_t num_inner_tiles);
  // Starts outer tile `outer`'s list (masked: loads its header); whether it visits any tile.
  bool start(int64_t outer);
  // Whether the list started last has a tile left.
  bool more() const { return lists_ == nullptr ? position_ < num_inner_tiles_ : run_left_ > 0 || run_ < runs_; }
  // The next tile of the list started last (masked: loads the next chunk of runs when the
  // previous one is used up, and a partial tile's bit set).
  VisitedTile next();

 private:
  io::FastMemory& fast_;
  const FlashTileLists* lists_;
  int64_t num_inner_tiles_;
  io::FastBuffer<int64_t> header_;  // (3): run_ptr[i], run_ptr[i + 1], partial_ptr[i]
  io::FastBuffer<int64_t> chunk_;   // (kFlashListChunk): run words
  io::FastBuffer<uint64_t> bits_;   // (bit_words)
  int64_t position_ = 0;            // dense: the next inner tile
  int64_t run_ = 0;                 // masked: runs of the list taken so far
  int64_t runs_ = 0;                // masked: runs in the list
  int64_t tile_ = 0;                // the current run's next tile
  int64_t run_left_ = 0;            // tiles left in the current run
  bool partial_ = false;            // the current run's kind
  int64_t next_partial_ = 0;        // row of the next partial tile's bit set
};

// The key tiles of each query tile (forward, dQ pass): the mask's query_rows lists, or all.
inline TileWalker key_tiles_of(io::FastMemory& fast, const FlashMask* mask, int64_t num_key_tiles) {
  return TileWalker(fast, mask != nullptr ? &mask->query_rows : nullptr, num_key_tiles);
}
// The query tiles of each key tile (dK/dV pass): the mask's key_cols lists, or all.
inline TileWalker query_tiles_of(io::FastMemory& fast, const FlashMask* mask,
                                 int64_t num_query_tiles) {
  return TileWalker(fast, mask != nullptr ? &mask->key_cols : nullptr, num_query_tiles);
}

}  // namespace flash_detail
}  // namespace spattn::schedules
