// spattn's PyTorch ops (TORCH_LIBRARY(spattn)): the schemas, and their CPU kernels: the forward and
// backward of spattn::attention_* on float32, float16 and bfloat16 tensors (outputs and gradients
// in the input's dtype, LSE float32), the fp64 reference on float64 tensors (what
// gradcheck differentiates), the plan preview, and merge_partials (attention over disjoint keys
// combined, spattn/shard.hpp). The CUDA kernels are in ops_cuda.cpp. Autograd is wired in Python
// (python/spattn/torch/__init__.py); these ops compute only. Every argument is checked before
// anything runs; errors name the argument and the value.
//
// The schemas hold only tensors, numbers and strings (masks by key), and forward and backward
// return only tensors, so that torch >= 2.4 can give them fake kernels and autograd and trace them
// with torch.compile (python/spattn/_compile.py). forward_counted is the eager forward with the
// counted ledger (io=True).
#include "op_arguments.hpp"
#include "report.hpp"

#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/reference.hpp>
#include <spattn/shard.hpp>

#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace spattn::torch_ext {

namespace {

constexpr c10::DeviceType kCpu = c10::DeviceType::CPU;

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

// float64: the fp64 reference (algorithm "reference" only: the schedules run float32, float16 and
// bfloat16). Any other dtype is left for check_tensor to refuse, naming it.
at::ScalarType cpu_dtype(const char* where, const at::Tensor& q, const std::string& algorithm) {
  const at::ScalarType dtype = q.scalar_type();
  if (dtype == at::kDouble && algorithm != "reference") {
    fail(where, ": float64 tensors run only with algorithm=\"reference\" (the fp64 oracle); got algorithm=\"",
         algorithm, "\"");
  }
  return dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16 ? dtype : at::kFloat;
}

// run(T{}) with T the spattn element type of a float32, float16 or bfloat16 dtype.
template <typename Run>
auto with_element_type(at::ScalarType dtype, Run&& run) {
  if (dtype == at::kHalf) return run(half_t{});
  if (dtype == at::kBFloat16) return run(bfloat16_t{});
  return run(float{});
}

// The forward; `report` (when not null) receives the plan and the counted ledger as JSON.
std::tuple<at::Tensor, at::Tensor> run_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                               at::IntArrayRef mask_keys, const c10::optional<double>& scale,
                                               const std::string& algorithm, int64_t cache_words,
                                               int64_t line_words, const std::string& objective, int64_t threads,
                                               std::string* report) {
  const char* where = "spattn.forward";
  const at::ScalarType dtype = cpu_dtype(where, q, algorithm);
  check_tensor(where, "q", q, dtype, kCpu);
  check_tensor(where, "k", k, dtype, kCpu);
  check_tensor(where, "v", v, dtype, kCpu);
  const std::vector<Mask> masks = masks_of(where, mask_keys);
  const AttentionOptions options = options_of(scale, algorithm, cache_words, line_words, objective, threads);
  const int64_t batch = q.size(0), heads = q.size(1), seqlen_q = q.size(2), head_dim_v = v.size(3);
  if (dtype == at::kDouble) {
    const auto result = reference::forward<int64_t>(view_of<const double>(q), view_of<const double>(k),
                                                    view_of<const double>(v), reference_masks(masks),
                                                    reference_scale(scale, q.size(3)));
    return {from_doubles(result.o, {batch, heads, seqlen_q, head_dim_v}),
            from_doubles(result.lse, {batch, heads, seqlen_q})};
  }
  at::Tensor o = at::empty({batch, heads, seqlen_q, head_dim_v}, q.options());
  at::Tensor lse = at::empty({batch, heads, seqlen_q, 1}, q.options().dtype(at::kFloat));
  with_element_type(dtype, [&](auto element) {
    using T = decltype(element);
    // Counted in lines of the plan's line size (a 64-byte line of T by default).
    io::Ledger ledger(io::plan_line_words(where, line_words, nullptr, io::line_words_of(element_type_of<T>())));
    AttentionOptions run = options;
    if (report) run.ledger = &ledger;
    const Plan plan = attention_forward(view_of<const T>(q), view_of<const T>(k), view_of<const T>(v), view_of<T>(o),
                                        view_of<float>(lse), head_masks(masks), run);
    if (report) *report = report_json(plan, &ledger);
  });
  return {o, lse.squeeze(-1)};
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           at::IntArrayRef mask_keys, c10::optional<double> scale,
                                           const std::string& algorithm, int64_t cache_words, int64_t line_words,
                                           const std::string& objective, int64_t threads) {
  return run_forward(q, k, v, mask_keys, scale, algorithm, cache_words, line_words, objective, threads, nullptr);
}

std::tuple<at::Tensor, at::Tensor, std::string> forward_counted(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& v, at::IntArrayRef mask_keys,
                                                                c10::optional<double> scale,
                                                                const std::string& algorithm, int64_t cache_words,
                                                                int64_t line_words, const std::string& objective,
                                                                int64_t threads) {
  if (algorithm == "reference") fail("spattn.forward: io=True counts spattn's schedules; the reference is not one");
  std::string report;
  auto [o, lse] = run_forward(q, k, v, mask_keys, scale, algorithm, cache_words, line_words, objective, threads,
                              &report);
  return {o, lse, report};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                        const at::Tensor& o, const at::Tensor& lse,
                                                        const at::Tensor& d_o, at::IntArrayRef mask_keys,
                                                        c10::optional<double> scale, const std::string& algorithm,
                                                        int64_t cache_words, int64_t line_words,
                                                        const std::string& objective, int64_t threads) {
  const char* where = "spattn.backward";
  const at::ScalarType dtype = cpu_dtype(where, q, algorithm);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}, {"o", o},
                                {"d_o", d_o}}) {
    check_tensor(where, name, t, dtype, kCpu);
  }
  if (lse.dim() != 3) fail(where, ": lse has ", lse.dim(), " dimensions, expected 3 (batch, heads, seqlen_q)");
  const std::vector<Mask> masks = masks_of(where, mask_keys);
  const AttentionOptions options = options_of(scale, algorithm, cache_words, line_words, objective, threads);
  if (dtype == at::kDouble) {
    const auto result = reference::backward<int64_t>(view_of<const double>(q), view_of<const double>(k),
                                                     view_of<const double>(v), view_of<const double>(d_o),
                                                     reference_masks(masks), reference_scale(scale, q.size(3)));
    return {from_doubles(result.dq, q.sizes()), from_doubles(result.dk, k.sizes()), from_doubles(result.dv, v.sizes())};
  }
  check_tensor(where, "lse", lse.unsqueeze(-1), at::kFloat, kCpu);
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  with_element_type(dtype, [&](auto element) {
    using T = decltype(element);
    attention_backward(view_of<const T>(q), view_of<const T>(k), view_of<const T>(v), view_of<const T>(o),
                       view_of<const float>(lse.unsqueeze(-1)), view_of<const T>(d_o), view_of<T>(dq), view_of<T>(dk),
                       view_of<T>(dv), head_masks(masks), options);
  });
  return {dq, dk, dv};
}

// spattn::merge_attention_partials on copies: o (batch, heads, seqlen, dim_v) and lse (batch, heads,
// seqlen) as forward returns them; the inputs are left untouched.
std::tuple<at::Tensor, at::Tensor> merge_partials(const at::Tensor& o, const at::Tensor& lse, const at::Tensor& o_part,
                                                  const at::Tensor& lse_part) {
  const char* where = "spattn.torch.merge_partials";
  check_tensor(where, "o", o, at::kFloat, kCpu);
  check_tensor(where, "o_part", o_part, at::kFloat, kCpu);
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"lse", lse}, {"lse_part", lse_part}}) {
    if (t.dim() != 3) fail(where, ": ", name, " has ", t.dim(), " dimensions, expected 3 (batch, heads, seqlen)");
    check_tensor(where, name, t.unsqueeze(-1), at::kFloat, kCpu);
  }
  at::Tensor merged_o = o.clone(at::MemoryFormat::Contiguous);
  at::Tensor merged_lse = lse.clone(at::MemoryFormat::Contiguous);
  renaming_errors(where, "merge_attention_partials", [&] {
    merge_attention_partials(view_of<float>(merged_o), view_of<float>(merged_lse.unsqueeze(-1)),
                             view_of<const float>(o_part), view_of<const float>(lse_part.unsqueeze(-1)));
  });
  return {merged_o, merged_lse};
}

int64_t max_threads() { return kMaxThreads; }

// shape: (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, head_dim_v); dtype: q's, without
// "torch." ("float32", "float16", "bfloat16"; it picks the default line size).
std::string plan(at::IntArrayRef shape, at::IntArrayRef mask_keys, const std::string& pass,
                 const std::string& algorithm, int64_t cache_words, int64_t line_words, const std::string& objective,
                 const std::string& dtype) {
  const char* where = "spattn.plan";
  if (shape.size() != 7) fail(where, ": shape has ", shape.size(), " entries, expected 7");
  if (pass != "forward" && pass != "backward") fail(where, ": pass '", pass, "' is not forward or backward");
  if (dtype != "float32" && dtype != "float16" && dtype != "bfloat16") {
    fail(where, ": q has dtype ", dtype, "; the CPU schedules run float32, float16 and bfloat16");
  }
  const ElementType element = dtype == "float16" ? ElementType::fp16 : dtype == "bfloat16" ? ElementType::bf16
                                                                                           : ElementType::fp32;
  const AttentionShape call{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5], shape[6], element};
  const std::vector<Mask> masks = masks_of(where, mask_keys);
  const AttentionOptions options = options_of(c10::nullopt, algorithm, cache_words, line_words, objective, 0);
  const Pass p = pass == "forward" ? Pass::forward : Pass::backward;
  const Plan planned = plan_attention(call, head_masks(masks), p, options);
  return report_json(planned, nullptr);
}

}  // namespace

TORCH_LIBRARY(spattn, m) {
  m.class_<TorchMask>("Mask")
      .def_static("from_spec", &TorchMask::from_spec)
      .def_static("from_csr", &TorchMask::from_csr)
      .def_static("full", &TorchMask::full)
      .def_static("from_intervals", &TorchMask::from_intervals)
      .def_static("from_blocks", &TorchMask::from_blocks)
      .def_static("from_block_indices", &TorchMask::from_block_indices)
      .def("key", &TorchMask::key)
      .def("seqlen_q", &TorchMask::seqlen_q)
      .def("seqlen_k", &TorchMask::seqlen_k)
      .def("nnz", &TorchMask::nnz)
      .def("is_full", &TorchMask::is_full)
      .def("form", &TorchMask::form)
      .def("memory_bytes", &TorchMask::memory_bytes)
      .def("intervals", &TorchMask::intervals)
      .def("blocks", &TorchMask::blocks)
      .def("select", &TorchMask::select)
      .def("attended_keys", &TorchMask::attended_keys)
      .def("crow_indices", &TorchMask::crow_indices)
      .def("col_indices", &TorchMask::col_indices);
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, int[] masks, float? scale, str algorithm, int cache_words, "
      "int line_words, str objective, int threads) -> (Tensor, Tensor)");
  m.def(
      "forward_counted(Tensor q, Tensor k, Tensor v, int[] masks, float? scale, str algorithm, int cache_words, "
      "int line_words, str objective, int threads) -> (Tensor, Tensor, str)");
  m.def(
      "backward(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor d_o, int[] masks, float? scale, "
      "str algorithm, int cache_words, int line_words, str objective, int threads) -> (Tensor, Tensor, Tensor)");
  m.def("plan(int[] shape, int[] masks, str pass_, str algorithm, int cache_words, int line_words, str objective, str dtype) -> str",
        TORCH_FN(plan));
  m.def("merge_partials(Tensor o, Tensor lse, Tensor o_part, Tensor lse_part) -> (Tensor, Tensor)");
  // The threads limit (spattn::kMaxThreads), so that Python checks the C++ rule, not a copy of it.
  m.def("max_threads() -> int", TORCH_FN(max_threads));
  m.impl("forward", c10::DispatchKey::CPU, TORCH_FN(forward));
  m.impl("merge_partials", c10::DispatchKey::CPU, TORCH_FN(merge_partials));
  m.impl("forward_counted", c10::DispatchKey::CPU, TORCH_FN(forward_counted));
  m.impl("backward", c10::DispatchKey::CPU, TORCH_FN(backward));
}

}  // namespace spattn::torch_ext
