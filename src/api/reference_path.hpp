// Algorithm::reference through the public API: the fp64 reference (spattn/reference.hpp) on
// double copies of the float views, results rounded into the caller's outputs. Not counted.
#pragma once

#include <spattn/mask.hpp>
#include <spattn/tensor.hpp>

#include <vector>

namespace spattn::api_detail {

// `masks`: one for all heads, or one per query head (reference::MaskList's conventions).
void reference_forward(const TensorView<const float>& q, const TensorView<const float>& k,
                       const TensorView<const float>& v, const TensorView<float>& o,
                       const TensorView<float>& lse, const std::vector<Mask>& masks, double scale);
void reference_backward(const TensorView<const float>& q, const TensorView<const float>& k,
                        const TensorView<const float>& v, const TensorView<const float>& d_o,
                        const TensorView<float>& dq, const TensorView<float>& dk,
                        const TensorView<float>& dv, const std::vector<Mask>& masks, double scale);

}  // namespace spattn::api_detail
