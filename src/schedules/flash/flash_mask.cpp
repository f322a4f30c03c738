// Building a FlashMask (re-blocking an element mask at the flash tiles' granularity) and walking
// its tile lists with counted loads (flash_mask.hpp, docs/block_sparse.md).
#include "schedules/flash/flash_mask.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/convert.hpp>

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

namespace spattn::schedules {

using io::Operand;
using io::WordKind;

namespace {

// The lists of a BsrMask whose block rows are the outer tiles, consecutive blocks of one kind
// joined into runs (partial slots numbered in block order, as csr_to_bsr_mask and
// transpose(BsrMask) produce them, so the bits are already in list order and move over unchanged).
template <typename Index>
FlashTileLists lists_of(sparse_formats::BsrMask<Index>&& bsr) {
  const auto& blocks = bsr.blocks;
  FlashTileLists lists;
  lists.outer_rows = blocks.num_rows;
  lists.inner_rows = blocks.num_cols;
  lists.outer_block = blocks.block_m;
  lists.inner_block = blocks.block_n;
  lists.bit_words = bsr.words_per_block();
  const int64_t num_outer = blocks.view().num_block_rows();
  lists.run_ptr.assign(static_cast<size_t>(num_outer) + 1, 0);
  lists.partial_ptr.assign(static_cast<size_t>(num_outer) + 1, 0);
  int64_t partial = 0;
  for (int64_t i = 0; i < num_outer; ++i) {
    const auto begin = static_cast<int64_t>(blocks.block_row_ptr[static_cast<size_t>(i)]);
    const auto end = static_cast<int64_t>(blocks.block_row_ptr[static_cast<size_t>(i) + 1]);
    for (int64_t b = begin; b < end;) {
      const bool is_partial = bsr.kind[static_cast<size_t>(b)] == sparse_formats::BlockKind::partial;
      const auto first = static_cast<int64_t>(blocks.block_col_idx[static_cast<size_t>(b)]);
      int64_t count = 0;
      for (; b < end && static_cast<int64_t>(blocks.block_col_idx[static_cast<size_t>(b)]) == first + count &&
             (bsr.kind[static_cast<size_t>(b)] == sparse_formats::BlockKind::partial) == is_partial;
           ++b, ++count) {
        assert(!is_partial || bsr.partial_slot[static_cast<size_t>(b)] == partial + count);
      }
      lists.append_run(first, count, is_partial);
      if (is_partial) partial += count;
    }
    lists.run_ptr[static_cast<size_t>(i) + 1] = lists.num_runs();
    lists.partial_ptr[static_cast<size_t>(i) + 1] = partial;
  }
  lists.bits = std::move(bsr.partial_bits);
  return lists;
}

void check_positive(const char* name, int64_t rows) {
  if (rows < 1) fail("build_flash_mask: tile ", name, " = ", rows, " rows must be positive");
}

// The FlashMask of a mask of `rows` x `cols`: query_lists(block_q, block_k) are its lists with the
// query tiles outer, key_lists(dkdv_block_k, dkdv_block_q) those with the key tiles outer.
template <typename QueryLists, typename KeyLists>
FlashMask flash_mask_of(int64_t rows, int64_t cols, int64_t nnz, int64_t seqlen_q, int64_t seqlen_k,
                        const FlashTiles& tiles, Pass pass, QueryLists&& query_lists, KeyLists&& key_lists) {
  if (rows != seqlen_q || cols != seqlen_k) {
    fail("build_flash_mask: mask is ", rows, " x ", cols, ", expected ", seqlen_q, " x ", seqlen_k,
         " (seqlen_q x seqlen_k)");
  }
  // A backward with dQ in the dK/dV pass walks the key tiles' lists only.
  const bool query_lists_walked = pass == Pass::forward || !tiles.dq_in_dkdv;
  check_positive("block_q", tiles.block_q);
  if (query_lists_walked) check_positive("block_k", tiles.block_k);
  if (pass == Pass::backward) {
    check_positive("dkdv_block_q", tiles.dkdv_block_q);
    check_positive("dkdv_block_k", tiles.dkdv_block_k);
  }
  FlashMask out;
  out.seqlen_q = seqlen_q;
  out.seqlen_k = seqlen_k;
  out.pass = pass;
  out.tiles = tiles;
  out.nnz = nnz;
  if (query_lists_walked) out.query_rows = query_lists(tiles.block_q, tiles.block_k);
  if (pass == Pass::backward) out.key_cols = key_lists(tiles.dkdv_block_k, tiles.dkdv_block_q);
  return out;
}

}  // namespace

template <typename Index>
FlashMask build_flash_mask(const sparse_formats::CsrPatternView<Index>& mask, int64_t seqlen_q,
                           int64_t seqlen_k, const FlashTiles& tiles, Pass pass) {
  return flash_mask_of(
      mask.num_rows, mask.num_cols, mask.nnz(), seqlen_q, seqlen_k, tiles, pass,
      [&](int64_t bq, int64_t bk) { return lists_of(sparse_formats::csr_to_bsr_mask(mask, bq, bk)); },
      // Block (I, J) at (dkdv_block_q x dkdv_block_k), transposed: key tile J's list of query tiles.
      [&](int64_t ck, int64_t cq) { return lists_of(sparse_formats::transpose(sparse_formats::csr_to_bsr_mask(mask, cq, ck))); });
}

FlashMask build_flash_mask(const sparse_formats::IntervalPattern& mask,
                           const sparse_formats::IntervalPattern* transposed, int64_t seqlen_q, int64_t seqlen_k,
                           const FlashTiles& tiles, Pass pass) {
  return flash_mask_of(
      mask.num_rows, mask.num_cols, mask.nnz(), seqlen_q, seqlen_k, tiles, pass,
      [&](int64_t bq, int64_t bk) { return flash_detail::interval_lists(mask, bq, bk); },
      [&](int64_t ck, int64_t cq) {
        // The key tiles' lists are the query tiles' lists of the transposed mask.
        if (transposed != nullptr) return flash_detail::interval_lists(*transposed, ck, cq);
        return flash_detail::interval_lists(sparse_formats::transpose(mask), ck, cq);
      });
}

template FlashMask build_flash_mask<int32_t>(const sparse_formats::CsrPatternView<int32_t>&,
                                             int64_t, int64_t, const FlashTiles&, Pass);
template FlashMask build_flash_mask<int64_t>(const sparse_formats::CsrPatternView<int64_t>&,
                                             int64_t, int64_t, const FlashTiles&, Pass);

int64_t flash_mask_resident_words(int64_t outer_rows, int64_t inner_rows) {
  return 3 + kFlashListChunk + sparse_formats::ceil_div(outer_rows * inner_rows, 64);
}

namespace flash_detail {

// The mask was re-blocked for these tiles, this pass and this shape: the plan hands both out
// together (plan/planned_run.hpp), so a mismatch is a bug in the caller, not bad input.
void check_mask([[maybe_unused]] const char* what, const FlashMask* mask, [[maybe_unused]] const HeadShape& shape,
                [[maybe_unused]] const FlashTiles& tiles, [[maybe_unused]] Pass pass) {
  if (mask == nullptr) return;
  assert(mask->seqlen_q == shape.seqlen_q && mask->seqlen_k == shape.seqlen_k && "flash mask of another shape");
  assert(mask->pass == pass && "flash mask built for the other pass");
  [[maybe_unused]] const FlashTiles& m = mask->tiles;
  assert(m.block_q == tiles.block_q && m.block_k == tiles.block_k && m.dq_in_dkdv == tiles.dq_in_dkdv &&
         (pass == Pass::forward || (m.dkdv_block_q == tiles.dkdv_block_q && m.dkdv_block_k == tiles.dkdv_block_k)) &&
         "flash mask built for other tiles");
}

TileWalker::TileWalker(io::FastMemory& fast, const FlashTileLists* lists, int64_t num_inner_tiles)
    : fast_(fast), lists_(lists), num_inner_tiles_(num_inner_tiles) {
  if (lists_ == nullptr) return;
  assert(lists_->num_inner_tiles() == num_inner_tiles);
  header_ = fast.allocate<int64_t>(3, "mask list header");
  chunk_ = fast.allocate<int64_t>(kFlashListChunk, "mask list chunk");
  bits_ = fast.allocate<uint64_t>(lists_->bit_words, "mask tile bits");
}

bool TileWalker::start(int64_t outer) {
  if (lists_ == nullptr) {
    position_ = 0;
    return num_inner_tiles_ > 0;
  }
  const auto run_ptr = io::SlowMatrix<const int64_t>::dense(lists_->run_ptr.data(), lists_->num_outer_tiles() + 1, 1);
  const auto partial_ptr = io::SlowMatrix<const int64_t>::dense(lists_->partial_ptr.data(),
                                                                lists_->num_outer_tiles() + 1, 1);
  fast_.load(Operand::mask, run_ptr, outer, 0, 2, 1, header_, 0, 1, WordKind::index);
  fast_.load(Operand::mask, partial_ptr, outer, 0, 1, 1, header_, 2, 1, WordKind::index);
  run_ = 0;
  runs_ = header_[1] - header_[0];
  run_left_ = 0;
  next_partial_ = header_[2];
  return runs_ > 0;
}

VisitedTile TileWalker::next() {
  assert(more());
  if (lists_ == nullptr) return VisitedTile{position_++, nullptr};
  if (run_left_ == 0) {
    // The next run; its two words lie in one chunk (kFlashListChunk is even).
    const int64_t word = 2 * run_, in_chunk = word % kFlashListChunk;
    if (in_chunk == 0) {
      const int64_t words = std::min(kFlashListChunk, 2 * runs_ - word);
      const auto run_words = io::SlowMatrix<const int64_t>::dense(lists_->runs.data(), 2 * lists_->num_runs(), 1);
      fast_.load(Operand::mask, run_words, 2 * header_[0] + word, 0, words, 1, chunk_, 0, 1, WordKind::index);
    }
    tile_ = chunk_[in_chunk] / 2;
    partial_ = chunk_[in_chunk] % 2 == 1;
    run_left_ = chunk_[in_chunk + 1];
    ++run_;
  }
  VisitedTile visited{tile_++, nullptr};
  --run_left_;
  assert(visited.tile >= 0 && visited.tile < num_inner_tiles_);
  if (partial_) {
    const int64_t words = lists_->bit_words;
    const auto bit_sets = io::SlowMatrix<const uint64_t>::dense(lists_->bits.data(), lists_->num_partial(), words);
    fast_.load(Operand::mask, bit_sets, next_partial_, 0, 1, words, bits_, 0, words, WordKind::index);
    ++next_partial_;
    visited.bits = bits_.data();
  }
  return visited;
}

}  // namespace flash_detail
}  // namespace spattn::schedules
