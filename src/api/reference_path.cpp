// Algorithm::reference through the public API (reference_path.hpp).
#include "api/reference_path.hpp"

#include <spattn/reference.hpp>

namespace spattn::api_detail {

namespace {

// A float view as a contiguous double copy.
struct DoubleCopy {
  std::vector<double> data;
  TensorView<const double> view;
};
DoubleCopy to_double(const TensorView<const float>& t) {
  DoubleCopy copy;
  copy.data.reserve(static_cast<size_t>(t.numel()));
  for (int64_t b = 0; b < t.batch(); ++b)
    for (int64_t h = 0; h < t.heads(); ++h)
      for (int64_t s = 0; s < t.seqlen(); ++s)
        for (int64_t d = 0; d < t.head_dim(); ++d) copy.data.push_back(t.at(b, h, s, d));
  copy.view = TensorView<const double>::contiguous(copy.data.data(), t.batch(), t.heads(), t.seqlen(), t.head_dim());
  return copy;
}

void copy_out(const std::vector<double>& from, const TensorView<float>& to) {
  size_t i = 0;
  for (int64_t b = 0; b < to.batch(); ++b)
    for (int64_t h = 0; h < to.heads(); ++h)
      for (int64_t s = 0; s < to.seqlen(); ++s)
        for (int64_t d = 0; d < to.head_dim(); ++d) to.at(b, h, s, d) = static_cast<float>(from[i++]);
}

reference::MaskList<int64_t> mask_list(const std::vector<Mask>& masks) {
  reference::MaskList<int64_t> list;
  for (const Mask& mask : masks) list.push_back(mask.csr());
  return list;
}

}  // namespace

void reference_forward(const TensorView<const float>& q, const TensorView<const float>& k,
                       const TensorView<const float>& v, const TensorView<float>& o,
                       const TensorView<float>& lse, const std::vector<Mask>& masks, double scale) {
  const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v);
  const auto result = reference::forward<int64_t>(qd.view, kd.view, vd.view, mask_list(masks), scale);
  copy_out(result.o, o);
  copy_out(result.lse, lse);
}

void reference_backward(const TensorView<const float>& q, const TensorView<const float>& k,
                        const TensorView<const float>& v, const TensorView<const float>& d_o,
                        const TensorView<float>& dq, const TensorView<float>& dk,
                        const TensorView<float>& dv, const std::vector<Mask>& masks, double scale) {
  const DoubleCopy qd = to_double(q), kd = to_double(k), vd = to_double(v), dod = to_double(d_o);
  const auto result = reference::backward<int64_t>(qd.view, kd.view, vd.view, dod.view, mask_list(masks), scale);
  copy_out(result.dq, dq);
  copy_out(result.dk, dk);
  copy_out(result.dv, dv);
}

}  // namespace spattn::api_detail
