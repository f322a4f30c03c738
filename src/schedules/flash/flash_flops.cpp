// The arithmetic of flash (flash_flops.hpp).
#include "schedules/flash/flash_flops.hpp"

#include "schedules/flash/flash_mask.hpp"

#include <algorithm>
#include <cstdint>

namespace spattn::schedules {

int64_t flash_flops_per_pair(const HeadShape& shape, flash_detail::FlashNest nest) {
  const int64_t d = shape.head_dim, e = shape.head_dim_v;
  switch (nest) {
    case flash_detail::FlashNest::forward: return 2 * (d + e);
    case flash_detail::FlashNest::dq: return 4 * d + 2 * e;
    case flash_detail::FlashNest::dkdv: return 4 * (d + e);
    case flash_detail::FlashNest::fused_dkdv: return 6 * d + 4 * e;
  }
  return 0;
}

int64_t stored_pairs(const FlashTileLists& lists, bool partial_only) {
  int64_t pairs = 0;
  for (int64_t outer = 0; outer < lists.num_outer_tiles(); ++outer) {
    const int64_t rows = flash_detail::tile_rows(lists.outer_rows, lists.outer_block, outer);
    for (int64_t r = lists.run_ptr[static_cast<size_t>(outer)]; r < lists.run_ptr[static_cast<size_t>(outer) + 1]; ++r) {
      if (partial_only && !lists.run_partial(r)) continue;
      const int64_t row0 = lists.run_first(r) * lists.inner_block;  // the run's rows (the last tile may be short)
      pairs += rows * std::min(lists.run_count(r) * lists.inner_block, lists.inner_rows - row0);
    }
  }
  return pairs;
}

int64_t flash_partial_pairs(const FlashMask* mask, Pass pass) {
  if (mask == nullptr) return 0;
  const int64_t query_pairs = stored_pairs(mask->query_rows, true);  // 0 with dQ in the dK/dV pass
  return pass == Pass::forward ? query_pairs : query_pairs + stored_pairs(mask->key_cols, true);
}

int64_t flash_flops(const HeadShape& shape, const FlashMask* mask, Pass pass, bool dq_in_dkdv) {
  using flash_detail::FlashNest;
  const int64_t all_pairs = shape.seqlen_q * shape.seqlen_k;
  const int64_t query_pairs = mask != nullptr ? stored_pairs(mask->query_rows) : all_pairs;
  if (pass == Pass::forward) return flash_flops_per_pair(shape, FlashNest::forward) * query_pairs;
  const int64_t key_pairs = mask != nullptr ? stored_pairs(mask->key_cols) : all_pairs;
  if (dq_in_dkdv) return flash_flops_per_pair(shape, FlashNest::fused_dkdv) * key_pairs;
  return flash_flops_per_pair(shape, FlashNest::dq) * query_pairs +
         flash_flops_per_pair(shape, FlashNest::dkdv) * key_pairs;
}


}  // namespace spattn::schedules
