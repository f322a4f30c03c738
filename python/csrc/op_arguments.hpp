// What the CPU and CUDA kernels of spattn's ops share: argument checks that name the argument and
// the value, tensor views over any strides, and masks from their keys (torch_mask.hpp).
#pragma once

#include "torch_mask.hpp"

#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/tensor.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace spattn::torch_ext {

// A 4-D tensor (batch, heads, seqlen, dim) of `dtype` on a device of `device_type`.
inline void check_tensor(const char* where, const char* name, const at::Tensor& t, at::ScalarType dtype,
                         c10::DeviceType device_type) {
  if (t.device().type() != device_type) {
    fail(where, ": ", name, " is on ", t.device().str(), ", expected ", c10::DeviceTypeName(device_type, true));
  }
  if (t.dim() != 4) fail(where, ": ", name, " has ", t.dim(), " dimensions, expected 4 (batch, heads, seqlen, dim)");
  if (t.scalar_type() != dtype) {
    fail(where, ": ", name, " has dtype ", c10::toString(t.scalar_type()), ", expected ", c10::toString(dtype));
  }
}

// T is the element type the kernel reads: the tensor's own, or a bit-compatible one (spattn's
// cuda::half_t for at::Half, cuda::bfloat16_t for at::BFloat16).
template <typename T>
TensorView<T> view_of(const at::Tensor& t) {
  TensorView<T> view;
  view.data = static_cast<T*>(const_cast<void*>(t.data_ptr()));
  for (int i = 0; i < 4; ++i) {
    view.shape[static_cast<size_t>(i)] = t.size(i);
    view.stride[static_cast<size_t>(i)] = t.stride(i);
  }
  return view;
}

inline std::vector<Mask> masks_of(const char* where, at::IntArrayRef keys) {
  if (keys.empty()) fail(where, ": masks is empty (give one mask for all heads, or one per query head)");
  std::vector<Mask> masks;
  masks.reserve(keys.size());
  for (const int64_t key : keys) masks.push_back(TorchMask::with_key(where, key));
  return masks;
}

// The mask argument of a call with these masks: one for all heads, or (several) one per query head.
inline HeadMasks head_masks(const std::vector<Mask>& masks) {
  return masks.size() == 1 ? HeadMasks(masks.front()) : HeadMasks(masks);
}

// Runs f, renaming the library function `library_where` in the messages of its InvalidArgument
// to the Python name `where` ("select_mask: rows[1] = ..." becomes "Mask.select: rows[1] = ...").
template <typename F>
auto renaming_errors(const char* where, const std::string& library_where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InvalidArgument& error) {
    const std::string message = error.what();
    const std::string prefix = library_where + ": ";
    fail(where, ": ", message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message);
  }
}

// threads: 0 = torch's intra-op thread count (at::get_num_threads()).
inline AttentionOptions options_of(const c10::optional<double>& scale, const std::string& algorithm,
                                   int64_t cache_words, int64_t line_words, const std::string& objective,
                                   int64_t threads) {
  AttentionOptions options;
  options.algorithm = parse_algorithm(algorithm);
  if (scale.has_value()) options.scale = *scale;
  options.cache_words = cache_words;
  options.line_words = line_words;
  options.objective = parse_plan_objective(objective);
  if (threads < 0 || threads > kMaxThreads) {
    fail("threads = ", threads, " must be in [0, ", kMaxThreads, "] (0 = torch's intra-op thread count)");
  }
  options.threads = static_cast<int>(threads == 0 ? at::get_num_threads() : threads);
  return options;
}

}  // namespace spattn::torch_ext
