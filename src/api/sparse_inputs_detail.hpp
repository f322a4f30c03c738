// The sparse-input entry points' checks (sparse_inputs.cpp). Private to src/api.
#pragma once

#include <spattn/bounds.hpp>
#include <spattn/sparse_inputs.hpp>

#include <vector>

namespace spattn::sparse_inputs_detail {

// The counts (q: batch x heads, k and v: batch x kv_heads, kv_heads dividing heads), each input
// valid (dense: a (1, 1, seqlen, dim) view with data; CSR: structure and finite values), every
// head of one shape and the shapes agreeing; errors name "q", "k" or "v" (with the index when
// there are several heads). Returns the per-head shape.
bounds::DenseShape check_inputs(const char* where, const MultiHeadInputs& inputs);

// The call's masks (HeadMasks::resolve), checked as attention.hpp's are (api/checks.hpp).
std::vector<Mask> check_masks(const char* where, const HeadMasks& masks, const MultiHeadInputs& inputs,
                              const bounds::DenseShape& shape);

// Query head h's mask (the shared one when there is one).
inline const Mask& head_mask(const std::vector<Mask>& masks, int64_t h) {
  return masks.size() == 1 ? masks.front() : masks[static_cast<size_t>(h)];
}

}  // namespace spattn::sparse_inputs_detail
