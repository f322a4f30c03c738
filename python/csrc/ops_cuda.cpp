// The CUDA kernels of spattn's ops (schemas in ops.cpp): forward and backward through spattn::cuda
// on float32, float16 and bfloat16 tensors, on the tensors' device and torch's current stream,
// asynchronously like torch's own ops. Compiled in every build: spattn::cuda throws "built without
// CUDA" where the backend is absent, and a CPU-only torch never dispatches here.
#include "op_arguments.hpp"

#include <spattn/cuda.hpp>
#include <spattn/error.hpp>

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#if defined(SPATTN_TORCH_CUDA)
#include <c10/cuda/CUDAStream.h>
#endif

#include <string>
#include <tuple>
#include <vector>

namespace spattn::torch_ext {

namespace {

constexpr c10::DeviceType kCuda = c10::DeviceType::CUDA;

cuda::Options cuda_options(const char* where, const at::Tensor& q, const c10::optional<double>& scale,
                           const std::string& algorithm, int64_t cache_words, int64_t line_words) {
  cuda::Options options;
  if (algorithm == "auto" || algorithm == "flash") {
    options.algorithm = cuda::CudaAlgorithm::flash;
  } else if (algorithm == "small_cache") {
    options.algorithm = cuda::CudaAlgorithm::small_cache;
  } else {
    fail(where, ": algorithm=\"", algorithm, "\" does not run on CUDA (auto, flash or small_cache; the fp64 "
         "reference runs on the CPU)");
  }
  if (cache_words != 0) {
    fail(where, ": cache_words = ", cache_words, " sizes the CPU schedules' fast memory; on CUDA it must be 0 (the "
         "kernels plan for the device's shared memory)");
  }
  if (line_words != 0) {
    fail(where, ": line_words = ", line_words, " is the CPU planner's line model; on CUDA it must be 0");
  }
  if (scale.has_value()) options.scale = *scale;
  options.synchronize = false;
#if defined(SPATTN_TORCH_CUDA)
  options.stream = c10::cuda::getCurrentCUDAStream(q.device().index()).stream();
#else
  (void)q;
#endif
  return options;
}

// The element type spattn::cuda reads for a torch dtype; a clear error for the others.
template <typename Run>
auto with_element_type(const char* where, at::ScalarType dtype, Run&& run) {
  switch (dtype) {
    case at::kFloat: return run(float{});
    case at::kHalf: return run(cuda::half_t{});
    case at::kBFloat16: return run(cuda::bfloat16_t{});
    default:
      fail(where, ": q has dtype ", c10::toString(dtype), "; CUDA runs float32, float16 and bfloat16");
  }
}

void check_same_device(const char* where, const at::Tensor& q, const char* name, const at::Tensor& t) {
  if (t.device() != q.device()) fail(where, ": ", name, " is on ", t.device().str(), ", q on ", q.device().str());
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           at::IntArrayRef mask_keys, c10::optional<double> scale,
                                           const std::string& algorithm, int64_t cache_words,
                                           int64_t line_words, const std::string& /*objective*/,
                                           int64_t /*threads*/) {
  const char* where = "spattn.forward";
  const at::ScalarType dtype = q.scalar_type();
  check_tensor(where, "q", q, dtype, kCuda);
  check_tensor(where, "k", k, dtype, kCuda);
  check_tensor(where, "v", v, dtype, kCuda);
  check_same_device(where, q, "k", k);
  check_same_device(where, q, "v", v);
  const std::vector<Mask> masks = masks_of(where, mask_keys);
  const c10::DeviceGuard guard(q.device());
  const cuda::Options options = cuda_options(where, q, scale, algorithm, cache_words, line_words);
  at::Tensor o = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2), 1}, q.options().dtype(at::kFloat));
  with_element_type(where, dtype, [&](auto element) {
    using T = decltype(element);
    cuda::attention_forward<T>(view_of<const T>(q), view_of<const T>(k), view_of<const T>(v), view_of<T>(o),
                               view_of<float>(lse), head_masks(masks), options);
    return 0;
  });
  return {o, lse.squeeze(-1)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                        const at::Tensor& o, const at::Tensor& lse,
                                                        const at::Tensor& d_o, at::IntArrayRef mask_keys,
                                                        c10::optional<double> scale, const std::string& algorithm,
                                                        int64_t cache_words, int64_t line_words,
                                                        const std::string& /*objective*/, int64_t /*threads*/) {
  const char* where = "spattn.backward";
  const at::ScalarType dtype = q.scalar_type();
  for (const auto& [name, t] : {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}, {"o", o},
                                {"d_o", d_o}}) {
    check_tensor(where, name, t, dtype, kCuda);
    check_same_device(where, q, name, t);
  }
  if (lse.dim() != 3) fail(where, ": lse has ", lse.dim(), " dimensions, expected 3 (batch, heads, seqlen_q)");
  check_tensor(where, "lse", lse.unsqueeze(-1), at::kFloat, kCuda);
  check_same_device(where, q, "lse", lse);
  const std::vector<Mask> masks = masks_of(where, mask_keys);
  const c10::DeviceGuard guard(q.device());
  const cuda::Options options = cuda_options(where, q, scale, algorithm, cache_words, line_words);
  at::Tensor dq = at::empty(q.sizes(), q.options());
  at::Tensor dk = at::empty(k.sizes(), k.options());
  at::Tensor dv = at::empty(v.sizes(), v.options());
  with_element_type(where, dtype, [&](auto element) {
    using T = decltype(element);
    cuda::attention_backward<T>(view_of<const T>(q), view_of<const T>(k), view_of<const T>(v), view_of<const T>(o),
                                view_of<const float>(lse.unsqueeze(-1)), view_of<const T>(d_o), view_of<T>(dq),
                                view_of<T>(dk), view_of<T>(dv), head_masks(masks), options);
    return 0;
  });
  return {dq, dk, dv};
}

}  // namespace

TORCH_LIBRARY_IMPL(spattn, CUDA, m) {
  m.impl("forward", TORCH_FN(forward));
  m.impl("backward", TORCH_FN(backward));
}

}  // namespace spattn::torch_ext
