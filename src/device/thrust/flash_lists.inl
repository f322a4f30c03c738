// The Thrust algorithm behind flash_lists.hpp: one direction of a FlashMask's tile lists from an
// element CSR, written once against a Thrust execution policy and vector type so that the same
// source runs on the device (src/cuda/flash_lists_device.cu: thrust::cuda::par, device_vector on
// the GPU) and on the host (flash_lists_host.cpp: Thrust's CPP device system), where the CPU tests
// compare it with schedules::build_flash_mask bit for bit.
//
// The algorithm is data-parallel and deterministic (no atomics; every reduction is over sorted
// keys), with no host loop over elements, tiles or lists:
//   1. each attended pair p gets its row (scatter of the rows' starts, then a running maximum) and one
//      64-bit key in tile-major order: key = tile * area + bit, where tile = outer tile *
//      num_inner + inner tile and bit = r * inner_block + c is the pair's place in its tile, as in
//      FlashTileLists::bits (for key_cols the outer coordinate is the column: the transpose);
//   2. the keys are sorted (radix sort for int64 on both backends);
//   3. reduce_by_key over key / area gives the stored tiles in list order (outer tile, then inner
//      tile increasing) and their pair counts; a tile is full when its count equals its in-range
//      area (edge tiles are clipped), exactly as csr_to_bsr_mask classifies blocks;
//   4. tile_ptr is a vectorized lower_bound of each outer tile's first key among the stored
//      tiles; the partial tiles' ranks are a scan of the partial flags and partial_ptr gathers them;
//   5. reduce_by_key with bit_or over the 64-bit word each key falls in gives every nonzero word of
//      every tile; the words of partial tiles are scattered to their rank's bit set. Bits beyond the
//      edge are never set, so they stay zero.
// Keys are distinct because a trusted CSR has distinct columns within a row.
//
// Included by exactly one translation unit per backend; everything here has internal linkage, so
// the host and device instantiations (different Thrust systems, same names) never meet at link time.
#pragma once

#include "device/thrust/flash_lists.hpp"

#include <thrust/binary_search.h>
#include <thrust/device_vector.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/gather.h>
#include <thrust/iterator/constant_iterator.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/reduce.h>
#include <thrust/scatter.h>
#include <thrust/scan.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cstdint>

namespace spattn::device {
namespace {

// THRUST_NS_QUALIFIER is ::thrust, or the wrapped namespace when the host build sets
// THRUST_CUB_WRAPPED_NAMESPACE (src/CMakeLists.txt).
namespace thr = THRUST_NS_QUALIFIER;

// Step 1: the tile-major key of pair (row, col).
struct ElementKey {
  ListGeometry g;
  SPATTN_HD int64_t operator()(int64_t row, int64_t col) const {
    const int64_t o = g.transposed ? col : row;
    const int64_t n = g.transposed ? row : col;
    const int64_t tile = (o / g.outer_block) * g.num_inner + n / g.inner_block;
    return tile * g.area + (o % g.outer_block) * g.inner_block + n % g.inner_block;
  }
};

struct RowHasPairs {
  const int64_t* row_ptr;
  SPATTN_HD bool operator()(int64_t row) const { return row_ptr[row] < row_ptr[row + 1]; }
};

struct TileOfKey {
  int64_t area;
  SPATTN_HD int64_t operator()(int64_t key) const { return key / area; }
};

// The global index of the bit-set word a key falls in: tile * bit_words + bit / 64.
struct WordOfKey {
  int64_t area, bit_words;
  SPATTN_HD int64_t operator()(int64_t key) const {
    return (key / area) * bit_words + (key % area) / 64;
  }
};

struct BitOfKey {
  int64_t area;
  SPATTN_HD uint64_t operator()(int64_t key) const { return uint64_t{1} << ((key % area) % 64); }
};

// 1 where the projection of keys[i] starts a new run (keys sorted): the run count sizes the
// reduce_by_key outputs exactly instead of at nnz.
template <typename Project>
struct StartsRun {
  const int64_t* keys;
  Project project;
  SPATTN_HD int64_t operator()(int64_t i) const {
    return i == 0 || project(keys[i]) != project(keys[i - 1]) ? 1 : 0;
  }
};

// Step 3: 1 when the stored tile is partial (fewer pairs than its in-range area).
struct IsPartial {
  ListGeometry g;
  SPATTN_HD int64_t operator()(int64_t tile, int64_t count) const {
    const int64_t rows = tile_math::tile_rows(g.outer_rows, g.outer_block, tile / g.num_inner);
    const int64_t cols = tile_math::tile_rows(g.inner_rows, g.inner_block, tile % g.num_inner);
    return count == rows * cols ? 0 : 1;
  }
};

struct Entry {
  int64_t num_inner;
  SPATTN_HD int64_t operator()(int64_t tile, int64_t partial) const {
    return 2 * (tile % num_inner) + partial;
  }
};

struct FirstTileOfOuter {
  int64_t num_inner;
  SPATTN_HD int64_t operator()(int64_t outer) const { return outer * num_inner; }
};

// Step 5: word u (of tile stored at segment[u]) goes to its partial rank's bit set, if partial.
struct ScatterWord {
  const int64_t* words;
  const uint64_t* values;
  const int64_t* segment;
  const int64_t* partial;       // (stored tiles): 1 when partial
  const int64_t* partial_rank;  // (stored tiles + 1): partial tiles before each
  uint64_t* bits;
  int64_t bit_words;
  SPATTN_HD void operator()(int64_t u) const {
    const int64_t s = segment[u];
    if (partial[s] == 0) return;
    bits[partial_rank[s] * bit_words + words[u] % bit_words] = values[u];
  }
};

template <typename Vector>
auto raw(Vector& v) {
  return thr::raw_pointer_cast(v.data());
}

// One direction of the lists of the CSR (row_ptr: seqlen_q + 1, col_idx: nnz; both readable by
// `exec`'s system) into the four arrays of FlashTileLists. Vec64 / VecU64: vectors of the policy's
// system (thrust::device_vector of the build's device system).
template <typename Policy, typename Vec64, typename VecU64>
void build_tile_lists(const Policy& exec, const int64_t* row_ptr, const int64_t* col_idx,
                      int64_t nnz, const ListGeometry& g, Vec64& tile_ptr, Vec64& partial_ptr,
                      Vec64& entries, VecU64& bits) {
  using thr::counting_iterator;
  using thr::make_transform_iterator;
  const counting_iterator<int64_t> zero(0);

  // 1-2. Rows: each non-empty row r writes r at its first pair (distinct places: no conflict),
  // and a running maximum carries it over the row's other pairs; then keys in place, then sorted.
  Vec64 keys(static_cast<size_t>(nnz), 0);
  if (nnz > 0) {  // row_ptr is read only where there are pairs to place
    thr::scatter_if(exec, zero, zero + g.seqlen_q, row_ptr,
                    make_transform_iterator(zero, RowHasPairs{row_ptr}), keys.begin());
    thr::inclusive_scan(exec, keys.begin(), keys.end(), keys.begin(), thr::maximum<int64_t>());
  }
  thr::transform(exec, keys.begin(), keys.end(), col_idx, keys.begin(), ElementKey{g});
  thr::sort(exec, keys.begin(), keys.end());

  // 3. Stored tiles with their pair counts, then full / partial and the entries.
  const TileOfKey tile_of{g.area};
  const int64_t stored = thr::transform_reduce(exec, zero, zero + nnz,
                                               StartsRun<TileOfKey>{raw(keys), tile_of},
                                               int64_t{0}, thr::plus<int64_t>());
  Vec64 tiles(static_cast<size_t>(stored)), counts(static_cast<size_t>(stored));
  thr::reduce_by_key(exec, make_transform_iterator(keys.begin(), tile_of),
                     make_transform_iterator(keys.end(), tile_of),
                     thr::constant_iterator<int64_t>(1), tiles.begin(), counts.begin());
  Vec64& partial = counts;  // the counts become the partial flags in place
  thr::transform(exec, tiles.begin(), tiles.end(), counts.begin(), partial.begin(), IsPartial{g});
  entries.resize(static_cast<size_t>(stored));
  thr::transform(exec, tiles.begin(), tiles.end(), partial.begin(), entries.begin(),
                 Entry{g.num_inner});

  // 4. partial_rank[s] = partial tiles before stored tile s (stored + 1 values); the lists.
  Vec64 partial_rank(static_cast<size_t>(stored) + 1, 0);
  thr::inclusive_scan(exec, partial.begin(), partial.end(), partial_rank.begin() + 1);
  tile_ptr.resize(static_cast<size_t>(g.num_outer) + 1);
  const auto first_tiles = make_transform_iterator(zero, FirstTileOfOuter{g.num_inner});
  thr::lower_bound(exec, tiles.begin(), tiles.end(), first_tiles, first_tiles + g.num_outer + 1,
                   tile_ptr.begin());
  partial_ptr.resize(tile_ptr.size());
  thr::gather(exec, tile_ptr.begin(), tile_ptr.end(), partial_rank.begin(), partial_ptr.begin());

  // 5. The nonzero words of every stored tile, OR-reduced, then the partial tiles' scattered.
  const int64_t num_partial = partial_rank.back();
  bits.assign(static_cast<size_t>(num_partial * g.bit_words), uint64_t{0});
  if (num_partial == 0) return;
  const WordOfKey word_of{g.area, g.bit_words};
  const int64_t num_words = thr::transform_reduce(exec, zero, zero + nnz,
                                                  StartsRun<WordOfKey>{raw(keys), word_of},
                                                  int64_t{0}, thr::plus<int64_t>());
  Vec64 words(static_cast<size_t>(num_words));
  VecU64 values(static_cast<size_t>(num_words));
  thr::reduce_by_key(exec, make_transform_iterator(keys.begin(), word_of),
                     make_transform_iterator(keys.end(), word_of),
                     make_transform_iterator(keys.begin(), BitOfKey{g.area}), words.begin(),
                     values.begin(), thr::equal_to<int64_t>(), thr::bit_or<uint64_t>());
  Vec64 segment(static_cast<size_t>(num_words));  // the stored tile of each word
  const auto word_tiles = make_transform_iterator(words.begin(), TileOfKey{g.bit_words});
  thr::lower_bound(exec, tiles.begin(), tiles.end(), word_tiles, word_tiles + num_words,
                   segment.begin());
  thr::for_each(exec, zero, zero + num_words,
                ScatterWord{raw(words), raw(values), raw(segment), raw(partial), raw(partial_rank),
                            raw(bits), g.bit_words});
}

}  // namespace
}  // namespace spattn::device
