// Shared by the CUDA attention tests (cuda_attention_test.cpp: fp32, cuda_half_precision_test.cpp:
// fp16 / bf16): a device run of forward then backward with NaN-filled outputs, over the problems,
// fp64 truth and naive 16-bit attention of support/half_precision.hpp.
#pragma once

#include "cuda_support.hpp"
#include "support/compare.hpp"
#include "support/half_precision.hpp"

#include <spattn/cuda.hpp>
#include <spattn/reference.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace spattn::testing::cuda_attention {

using namespace spattn::testing::half_precision;

using spattn::Mask;
using spattn::TensorView;
using spattn::cuda::bfloat16_t;
using spattn::cuda::CudaAlgorithm;
using spattn::cuda::half_t;
using spattn::testing::fp32_tolerance;
using spattn::testing::max_abs;
using spattn::testing::max_abs_error;

class CudaAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!spattn::cuda::device_available()) GTEST_SKIP() << spattn::cuda::device_status();
  }
};

// ---- the device run -------------------------------------------------------------------------

struct DeviceOut : Outputs {
  spattn::cuda::DeviceRun forward_run, backward_run;  // what ran
};

// Forward, then backward from the device's own O and LSE (as a training step runs). Outputs start
// as NaN so that an element no kernel writes shows up. `layout_bshd`: the tensors live as
// (batch, seqlen, heads, dim) in memory (strided views).
template <typename T>
DeviceOut run_device(const Problem& p, const std::vector<Mask>& masks, const spattn::cuda::Options& options,
                     bool layout_bshd = false) {
  using spattn::cuda::DeviceMemory;
  auto view = [&](T* data, int64_t heads, int64_t n, int64_t dim) {
    if (!layout_bshd) return TensorView<T>::contiguous(data, p.batch, heads, n, dim);
    return TensorView<T>{data, {p.batch, heads, n, dim}, {n * heads * dim, dim, heads * dim, 1}};
  };
  // Host data between (batch, heads, seqlen, dim) order and the memory order of `view`.
  auto relayout = [&](const std::vector<float>& x, int64_t heads, int64_t n, int64_t dim, bool to_memory) {
    if (!layout_bshd) return x;
    std::vector<float> out(x.size());
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t s = 0; s < n; ++s)
          for (int64_t i = 0; i < dim; ++i) {
            const auto logical = static_cast<size_t>(((b * heads + h) * n + s) * dim + i);
            const auto memory = static_cast<size_t>(((b * n + s) * heads + h) * dim + i);
            out[to_memory ? memory : logical] = x[to_memory ? logical : memory];
          }
    return out;
  };
  auto to_layout = [&](const std::vector<float>& x, int64_t heads, int64_t n, int64_t dim) {
    return relayout(x, heads, n, dim, true);
  };
  auto from_layout = [&](const std::vector<float>& x, int64_t heads, int64_t n, int64_t dim) {
    return relayout(x, heads, n, dim, false);
  };
  DeviceMemory<T> q(to_elements<T>(to_layout(p.q, p.heads, p.n_q, p.d)));
  DeviceMemory<T> k(to_elements<T>(to_layout(p.k, p.kv_heads, p.n_k, p.d)));
  DeviceMemory<T> v(to_elements<T>(to_layout(p.v, p.kv_heads, p.n_k, p.e)));
  DeviceMemory<T> d_o(to_elements<T>(to_layout(p.d_o, p.heads, p.n_q, p.e)));
  DeviceMemory<T> o(nan_filled<T>(p.o_numel()));
  DeviceMemory<float> lse(std::vector<float>(static_cast<size_t>(p.batch * p.heads * p.n_q), NAN));
  DeviceMemory<T> dq(nan_filled<T>(p.q_numel())), dk(nan_filled<T>(p.k_numel())), dv(nan_filled<T>(p.v_numel()));

  const auto qv = view(q.data(), p.heads, p.n_q, p.d), kv = view(k.data(), p.kv_heads, p.n_k, p.d);
  const auto vv = view(v.data(), p.kv_heads, p.n_k, p.e), ov = view(o.data(), p.heads, p.n_q, p.e);
  const auto dov = view(d_o.data(), p.heads, p.n_q, p.e);
  const auto lsev = TensorView<float>::contiguous(lse.data(), p.batch, p.heads, p.n_q, 1);
  DeviceOut out;
  // One mask: shared by every head; several: one per query head.
  const spattn::HeadMasks head_masks =
      masks.size() == 1 ? spattn::HeadMasks(masks.front()) : spattn::HeadMasks(masks);
  out.forward_run = spattn::cuda::attention_forward<T>(qv, kv, vv, ov, lsev, head_masks, options);
  out.backward_run = spattn::cuda::attention_backward<T>(qv, kv, vv, ov, lsev, dov, view(dq.data(), p.heads, p.n_q, p.d),
                                      view(dk.data(), p.kv_heads, p.n_k, p.d),
                                      view(dv.data(), p.kv_heads, p.n_k, p.e), head_masks, options);
  out.o = from_layout(to_floats(o.download()), p.heads, p.n_q, p.e);
  out.lse = lse.download();
  out.dq = from_layout(to_floats(dq.download()), p.heads, p.n_q, p.d);
  out.dk = from_layout(to_floats(dk.download()), p.kv_heads, p.n_k, p.d);
  out.dv = from_layout(to_floats(dv.download()), p.kv_heads, p.n_k, p.e);
  return out;
}

inline spattn::cuda::Options options_for(CudaAlgorithm algorithm, int64_t smem_bytes = 0) {
  spattn::cuda::Options options;
  options.algorithm = algorithm;
  options.shared_memory_bytes = smem_bytes;
  return options;
}

inline std::string label(const std::string& spec, const Problem& p, CudaAlgorithm algorithm) {
  return spec + " at " + std::to_string(p.n_q) + " x " + std::to_string(p.n_k) + ", d " + std::to_string(p.d) +
         ", e " + std::to_string(p.e) + ", " + spattn::cuda::cuda_algorithm_name(algorithm);
}

// Both algorithms, or those SPATTN_CUDA_TEST_ALGORITHMS names ("flash": the CPU emulation of the
// flash kernels, tests/cuda/emulation, has no cuSPARSE).
inline std::vector<CudaAlgorithm> algorithms() {
  const char* only = std::getenv("SPATTN_CUDA_TEST_ALGORITHMS");
  std::vector<CudaAlgorithm> result;
  for (const CudaAlgorithm algorithm : {CudaAlgorithm::flash, CudaAlgorithm::small_cache}) {
    if (only == nullptr || std::string(only).find(spattn::cuda::cuda_algorithm_name(algorithm)) != std::string::npos) {
      result.push_back(algorithm);
    }
  }
  return result;
}
inline bool tested(CudaAlgorithm algorithm) {
  const auto all = algorithms();
  return std::find(all.begin(), all.end(), algorithm) != all.end();
}


}  // namespace spattn::testing::cuda_attention
