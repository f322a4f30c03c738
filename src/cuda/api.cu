// The CUDA API (include/spattn/cuda.hpp): validate on the host, pick the path, run it.
#include <spattn/cuda.hpp>

#include "cuda/api_instances.hpp"

#include "cuda/check.hpp"
#include "cuda/finite_scan.hpp"
#include "cuda/flash.hpp"
#include "cuda/runtime.hpp"
#include "cuda/small_cache.hpp"
#include "device/device_tiles.hpp"

#include <utility>

namespace spattn::cuda {
namespace {

// The shared memory per block (words) the flash kernels may use.
int64_t smem_budget_words(const char* where, const Options& options) {
  const int64_t device_bytes = shared_memory_per_block();
  if (options.shared_memory_bytes < 0 || options.shared_memory_bytes > device_bytes) {
    fail(where, ": shared_memory_bytes = ", options.shared_memory_bytes, " must be in [0, ", device_bytes,
         "] (this device's opt-in shared memory per block; 0 = all of it)");
  }
  return (options.shared_memory_bytes == 0 ? device_bytes : options.shared_memory_bytes) / 4;
}

void finish(const Options& options) {
  if (options.synchronize) SPATTN_CUDA_CHECK(cudaStreamSynchronize(detail::as_stream(options.stream)));
}

}  // namespace

template <typename T>
DeviceRun attention_forward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v,
                            TensorView<T> o, TensorView<float> lse, const HeadMasks& given,
                            const Options& options) {
  const char* where = "cuda::attention_forward";
  const std::vector<Mask> masks = given.resolve(where, q.shape[1], q.shape[2], k.shape[2]);
  const device::DeviceShape shape = device::check_forward(where, device::info(q), device::info(k),
                                                          device::info(v), device::info(o),
                                                          device::info(lse), masks);
  const float scale = device::resolve_scale(where, options.scale, shape.head_dim);
  detail::require_device("attention_forward");
  const detail::ForwardViews<T> views{q, k, v, o, lse};
  const cudaStream_t stream = detail::as_stream(options.stream);
  if (options.check_finite) {
    for (const auto& [name, t] : {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}}) {
      detail::check_finite_on_device(where, name, t, false, stream);
    }
  }
  DeviceRun run;
  if (options.algorithm == CudaAlgorithm::flash) {
    run = detail::flash_forward(shape, views, masks, scale, smem_budget_words(where, options), options.tensor_cores, stream);
  } else {
    run = detail::small_cache_forward(shape, views, masks, scale, stream);
  }
  finish(options);
  return run;
}

template <typename T>
DeviceRun attention_backward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v,
                             TensorView<const T> o, TensorView<const float> lse,
                             TensorView<const T> d_o, TensorView<T> dq, TensorView<T> dk,
                             TensorView<T> dv, const HeadMasks& given,
                             const Options& options) {
  const char* where = "cuda::attention_backward";
  const std::vector<Mask> masks = given.resolve(where, q.shape[1], q.shape[2], k.shape[2]);
  const device::DeviceShape shape = device::check_backward(
      where, device::info(q), device::info(k), device::info(v), device::info(o), device::info(lse),
      device::info(d_o), device::info(dq), device::info(dk), device::info(dv), masks);
  const float scale = device::resolve_scale(where, options.scale, shape.head_dim);
  detail::require_device("attention_backward");
  const detail::BackwardViews<T> views{q, k, v, o, lse, d_o, dq, dk, dv};
  const cudaStream_t stream = detail::as_stream(options.stream);
  if (options.check_finite) {
    for (const auto& [name, t] : {std::pair{"q", q}, std::pair{"k", k}, std::pair{"v", v}, std::pair{"o", o},
                                  std::pair{"d_o", d_o}}) {
      detail::check_finite_on_device(where, name, t, false, stream);
    }
    detail::check_finite_on_device(where, "lse", lse, true, stream);
  }
  DeviceRun run;
  if (options.algorithm == CudaAlgorithm::flash) {
    run = detail::flash_backward(shape, views, masks, scale, smem_budget_words(where, options), options.tensor_cores, stream);
  } else {
    run = detail::small_cache_backward(shape, views, masks, scale, stream);
  }
  finish(options);
  return run;
}

void release_device_caches() { detail::release_flash_lists(); }

SPATTN_CUDA_API_INSTANCES

}  // namespace spattn::cuda
