// The density-adaptive small-cache schedule run on a HeadFixture: the prepared mask of a CSR
// pattern, and forward / backward at fast memory M with the tiles chosen for M, counted into
// `ledger` when one is given, natively otherwise.
#pragma once

#include "plan/sparse_small_cache_tile_choice.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"
#include "support/head_fixture.hpp"

#include <sparse_formats/convert.hpp>
#include <sparse_formats/csr.hpp>

#include <cstdint>

namespace spattn::testing {

inline schedules::SparseSmallCacheMask prepare_mask(const sparse_formats::CsrPattern<int32_t>& mask) {
  return schedules::SparseSmallCacheMask(sparse_formats::convert_index<int64_t>(mask.view()).view());
}

inline void run_sparse_small_cache_forward(HeadFixture& head, const schedules::SparseSmallCacheMask& mask,
                                           int64_t cache_words, io::Ledger* ledger = nullptr) {
  io::FastMemory fast(cache_words, ledger, "sparse_small_cache forward");
  schedules::sparse_small_cache_forward(
      fast, head.forward(), mask, schedules::sparse_small_cache_tiles(head.shape, mask, cache_words, Pass::forward));
}

// Reads the head's o and lse as the forward left them.
inline void run_sparse_small_cache_backward(HeadFixture& head, const schedules::SparseSmallCacheMask& mask,
                                            int64_t cache_words, io::Ledger* ledger = nullptr) {
  io::FastMemory fast(cache_words, ledger, "sparse_small_cache backward");
  schedules::sparse_small_cache_backward(
      fast, head.backward(), mask, schedules::sparse_small_cache_tiles(head.shape, mask, cache_words, Pass::backward));
}

}  // namespace spattn::testing
