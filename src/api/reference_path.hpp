// Algorithm::reference through the public API: the fp64 reference (spattn/reference.hpp) on
// double copies of the views, results rounded into the caller's outputs (for 16-bit outputs,
// through float). Not counted.
#pragma once

#include <spattn/elements.hpp>
#include <spattn/mask.hpp>
#include <spattn/tensor.hpp>

#include <vector>

namespace spattn::api_detail {

// `masks`: one for all heads, or one per query head (reference::MaskList's conventions). T is
// float, half_t or bfloat16_t; lse is float.
template <typename T>
void reference_forward(const TensorView<const T>& q, const TensorView<const T>& k, const TensorView<const T>& v,
                       const TensorView<T>& o, const TensorView<float>& lse, const std::vector<Mask>& masks,
                       double scale);
template <typename T>
void reference_backward(const TensorView<const T>& q, const TensorView<const T>& k, const TensorView<const T>& v,
                        const TensorView<const T>& d_o, const TensorView<T>& dq, const TensorView<T>& dk,
                        const TensorView<T>& dv, const std::vector<Mask>& masks, double scale);
}  // namespace spattn::api_detail
