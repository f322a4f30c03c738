// Algorithm::reference through the public API (reference_path.hpp).
#include "api/reference_path.hpp"

#include <spattn/reference.hpp>

namespace spattn::api_detail {

namespace {

// A view as a contiguous double copy.
struct DoubleCopy {
  std::vector<double> data;
  TensorView<const double> view;
};
template <typename T>
DoubleCopy to_double(const TensorView<const T>& t) {
  DoubleCopy copy;
  copy.data.reserve(static_cast<size_t>(t.numel()));
  for (int64_t b = 0; b < t.batch(); ++b)
    for (int64_t h = 0; h < t.heads(); ++h)
      for (int64_t s = 0; s < t.seqlen(); ++s)
        for (int64_t d = 0; d < t.head_dim(); ++d) copy.data.push_back(to_float(t.at(b, h, s, d)));
  copy.view = TensorView<const double>::contiguous(copy.data.data(), t.batch(), t.heads(), t.seqlen(), t.head_dim());
  return copy;
}

template <typename T>
void copy_out(const std::vector<double>& from, const TensorView<T>& to) {
  size_t i = 0;
  for (int64_t b = 0; b < to.batch(); ++b)
    for (int64_t h = 0; h < to.heads(); ++h)
      for (int64_t s = 0; s < to.seqlen(); ++s)
        for (int64_t d = 0; d < to.head_dim(); ++d) to.at(b, h, s, d) = from_float<T>(static_cast<float>(from[i++]));
}

reference::MaskList<int64_t> mask_list(const std::vector<Mask>& masks) {
  reference::MaskList<int64_t> list;
  for (const Mask& mask : masks) list.push_back(mask.csr());
  return list;
}

}  // namespace

template <typename T>
void reference_forward(const TensorView<const T>& q, const TensorView<const T>& k, const TensorView<const T>& v,
                       const TensorView<T>& o, const TensorView<float>& lse, const std::vector<Mask>& masks,
                       double scale) {
  const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v);
  const auto result = reference::forward<int64_t>(qd.view, kd.view, vd.view, mask_list(masks), scale);
  copy_out(result.o, o);
  copy_out(result.lse, lse);
}

template <typename T>
void reference_backward(const TensorView<const T>& q, const TensorView<const T>& k, const TensorView<const T>& v,
                        const TensorView<const T>& d_o, const TensorView<T>& dq, const TensorView<T>& dk,
                        const TensorView<T>& dv, const std::vector<Mask>& masks, double scale) {
  const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v), dod = to_double(d_o);
  const auto result = reference::backward<int64_t>(qd.view, kd.view, vd.view, dod.view, mask_list(masks), scale);
  copy_out(result.dq, dq);
  copy_out(result.dk, dk);
  copy_out(result.dv, dv);
}

#define SPATTN_REFERENCE_PATH(T)                                                                                \
  template void reference_forward(const TensorView<const T>&, const TensorView<const T>&,                       \
                                  const TensorView<const T>&, const TensorView<T>&, const TensorView<float>&,   \
                                  const std::vector<Mask>&, double);                                            \
  template void reference_backward(const TensorView<const T>&, const TensorView<const T>&,                      \
                                   const TensorView<const T>&, const TensorView<const T>&, const TensorView<T>&, \
                                   const TensorView<T>&, const TensorView<T>&, const std::vector<Mask>&, double);
SPATTN_REFERENCE_PATH(float)
SPATTN_REFERENCE_PATH(half_t)
SPATTN_REFERENCE_PATH(bfloat16_t)
#undef SPATTN_REFERENCE_PATH

}  // namespace spattn::api_detail
