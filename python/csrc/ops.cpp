// spattn's PyTorch ops (TORCH_LIBRARY(spattn)): the forward and backward of spattn::attention_*
// on float32 CPU tensors, the fp64 reference on float64 tensors (what gradcheck differentiates),
// and the plan preview. Autograd is wired in Python (python/spattn/torch.py); these ops compute
// only. Every argument is checked before anything runs; errors name the argument and the value.
#include "report.hpp"
#include "torch_mask.hpp"

#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace spattn::torch_ext {

namespace {

using MaskList = c10::List<c10::intrusive_ptr<TorchMask>>;

void check_tensor(const char* where, const char* name, const at::Tensor& t, at::ScalarType dtype) {
  if (t.device().type() != c10::DeviceType::CPU) {
    fail(where, ": ", name, " is on ", t.device().str(), "; this build of spattn's ops runs on the CPU");
  }
  if (t.dim() != 4) fail(where, ": ", name, " has ", t.dim(), " dimensions, expected 4 (batch, heads, seqlen, dim)");
  if (t.scalar_type() != dtype) {
    fail(where, ": ", name, " has dtype ", c10::toString(t.scalar_type()), ", expected ", c10::toString(dtype));
  }
}

template <typename T>
TensorView<T> view_of(const at::Tensor& t) {
  TensorView<T> view;
  view.data = const_cast<T*>(t.data_ptr<std::remove_const_t<T>>());
  for (int i = 0; i < 4; ++i) {
    view.shape[static_cast<size_t>(i)] = t.size(i);
    view.stride[static_cast<size_t>(i)] = t.stride(i);
  }
  return view;
}

std::vector<Mask> masks_of(const char* where, const MaskList& list) {
  if (list.empty()) fail(where, ": masks is empty (give one mask for all heads, or one per query head)");
  std::vector<Mask> masks;
  for (const c10::intrusive_ptr<TorchMask>& holder : list) masks.push_back(holder->mask);
  return masks;
}

AttentionOptions options_of(const c10::optional<double>& scale, const std::string& algorithm, int64_t cache_words,
                            const std::string& objective, int64_t threads) {
  AttentionOptions options;
  options.algorithm = parse_algorithm(algorithm);
  if (scale.has_value()) options.scale = *scale;
  options.cache_words = cache_words;
  options.objective = parse_plan_objective(objective);
  if (threads < 0 || threads > 4096) fail("threads = ", threads, " must be in [0, 4096]");
  options.threads = static_cast<int>(threads);
  return options;
}

reference::MaskList<int64_t> reference_masks(const std::vector<Mask>& masks) {
  reference::MaskList<int64_t> list;
  for (const Mask& mask : masks) list.push_back(mask.csr());
  return list;
}

at::Tensor from_doubles(const std::vector<double>& values, at::IntArrayRef shape) {
  return at::from_blob(const_cast<double*>(values.data()), shape, at::kDouble).clone();
}

double reference_scale(const c10::optional<double>& scale, int64_t head_dim) {
  return scale.value_or(head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
}

// float64: the fp64 reference (algorithm "reference" only: the schedules run float32).
void check_reference(const char* where, const at::Tensor& q, const std::string& algorithm) {
  if (q.scalar_type() == at::kDouble && algorithm != "reference") {
    fail(where, ": float64 tensors run only with algorithm=\"reference\" (the fp64 oracle); got algorithm=\"",
         algorithm, "\"");
  }
}

std::tuple<at::Tensor, at::Tensor, std::string> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                        const MaskList& mask_list, c10::optional<double> scale,
                                                        const std::string& algorithm, int64_t cache_words,
                                                        const std::string& objective, int64_t threads, bool io) {
  const char* where = "spattn.forward";
  check_reference(where, q, algorithm);
  const at::ScalarType dtype = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  check_tensor(where, "q", q, dtype);
  check_tensor(where, "k", k, dtype);
  check_tensor(where, "v", v, dtype);
  const std::vector<Mask> masks = masks_of(where, mask_list);
  const AttentionOptions options = options_of(scale, algorithm, cache_words, objective, threads);
  const int64_t batch = q.size(0), heads = q.size(1), seqlen_q = q.size(2), head_dim_v = v.size(3);
  if (dtype == at::kDouble) {
    const auto result = reference::forward<int64_t>(view_of<const double>(q), view_of<const double>(k),
                                                    view_of<const double>(v), reference_masks(masks),
                                                    reference_scale(scale, q.size(3)));
    return {from_doubles(result.o, {batch, heads, seqlen_q, head_dim_v}),
            from_doubles(result.lse, {batch, heads, seqlen_q}), std::string()};
  }
  at::Tensor o = at::empty({batch, heads, seqlen_q, head_dim_v}, q.options());
  at::Tensor lse = at::empty({batch, heads, seqlen_q, 1}, q.options());
  io::Ledger ledger;
  AttentionOptions run = options;
  if (io) run.ledger = &ledger;
  const auto qv = view_of<const float>(q), kv = view_of<const float>(k), vv = view_of<const float>(v);
  const Plan plan = masks.size() == 1
                        ? attention_forward(qv, kv, vv, view_of<float>(o), view_of<float>(lse), masks.front(), run)
                        : attention_forward(qv, kv, vv, view_of<float>(o), view_of<float>(lse), masks, run);
  return {o, lse.squeeze(-1), io ? report_json(plan, &ledger) : std::string()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, std::string> backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& o, const at::Tensor& lse,
    const at::Tensor& d_o, const MaskList& mask_list, c10::optional<double> scale, const std::string& algorithm,
    int64_t cache_words, const std::string& objective, int64_t threads, bool io) {
  const char* where = "spattn.backward";
  check_reference(where, q, algorithm);
  const at::ScalarType dtype = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}, {"o", o},
                                {"d_o", d_o}}) {
    check_tensor(where, name, t, dtype);
  }
  if (lse.dim() != 3) fail(where, ": lse has ", lse.dim(), " dimensions, expected 3 (batch, heads, seqlen_q)");
  const std::vector<Mask> masks = masks_of(where, mask_list);
  const AttentionOptions options = options_of(scale, algorithm, cache_words, objective, threads);
  if (dtype == at::kDouble) {
    const auto result = reference::backward<int64_t>(view_of<const double>(q), view_of<const double>(k),
                                                     view_of<const double>(v), view_of<const double>(d_o),
                                                     reference_masks(masks), reference_scale(scale, q.size(3)));
    return {from_doubles(result.dq, q.sizes()), from_doubles(result.dk, k.sizes()), from_doubles(result.dv, v.sizes()),
            std::string()};
  }
  check_tensor(where, "lse", lse.unsqueeze(-1), at::kFloat);
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  io::Ledger ledger;
  AttentionOptions run = options;
  if (io) run.ledger = &ledger;
  const auto qv = view_of<const float>(q), kv = view_of<const float>(k), vv = view_of<const float>(v);
  const auto ov = view_of<const float>(o), lv = view_of<const float>(lse.unsqueeze(-1)),
             dov = view_of<const float>(d_o);
  const Plan plan =
      masks.size() == 1
          ? attention_backward(qv, kv, vv, ov, lv, dov, view_of<float>(dq), view_of<float>(dk), view_of<float>(dv),
                               masks.front(), run)
          : attention_backward(qv, kv, vv, ov, lv, dov, view_of<float>(dq), view_of<float>(dk), view_of<float>(dv),
                               masks, run);
  return {dq, dk, dv, io ? report_json(plan, &ledger) : std::string()};
}

// shape: (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v).
std::string plan(at::IntArrayRef shape, const MaskList& mask_list, const std::string& pass, const std::string& algorithm,
                 int64_t cache_words, const std::string& objective) {
  const char* where = "spattn.plan";
  if (shape.size() != 7) fail(where, ": shape has ", shape.size(), " entries, expected 7");
  if (pass != "forward" && pass != "backward") fail(where, ": pass '", pass, "' is not forward or backward");
  const AttentionShape call{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6]};
  const std::vector<Mask> masks = masks_of(where, mask_list);
  const AttentionOptions options = options_of(c10::nullopt, algorithm, cache_words, objective, 0);
  const Pass p = pass == "forward" ? Pass::forward : Pass::backward;
  const Plan planned = masks.size() == 1 ? plan_attention(call, masks.front(), p, options)
                                         : plan_attention(call, masks, p, options);
  return report_json(planned, nullptr);
}

}  // namespace

TORCH_LIBRARY(spattn, m) {
  m.class_<TorchMask>("Mask")
      .def_static("from_spec", &TorchMask::from_spec)
      .def_static("from_csr", &TorchMask::from_csr)
      .def_static("full", &TorchMask::full)
      .def("seqlen_q", &TorchMask::seqlen_q)
      .def("seqlen_k", &TorchMask::seqlen_k)
      .def("nnz", &TorchMask::nnz)
      .def("is_full", &TorchMask::is_full)
      .def("crow_indices", &TorchMask::crow_indices)
      .def("col_indices", &TorchMask::col_indices);
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, __torch__.torch.classes.spattn.Mask[] masks, float? scale, "
      "str algorithm, int cache_words, str objective, int threads, bool io) -> (Tensor, Tensor, str)");
  m.def(
      "backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor d_o, "
      "__torch__.torch.classes.spattn.Mask[] masks, float? scale, str algorithm, int cache_words, str objective, "
      "int threads, bool io) -> (Tensor, Tensor, Tensor, str)");
  m.def(
      "plan(int[] shape, __torch__.torch.classes.spattn.Mask[] masks, str pass_, str algorithm, int cache_words, "
      "str objective) -> str",
      TORCH_FN(plan));
  m.impl("forward", c10::DispatchKey::CPU, TORCH_FN(forward));
  m.impl("backward", c10::DispatchKey::CPU, TORCH_FN(backward));
}

}  // namespace spattn::torch_ext
