// Shared by the CUDA attention tests (cuda_attention_test.cpp: fp32, cuda_half_precision_test.cpp:
// fp16 / bf16): random problems, the fp64 truth from spattn::reference, a device run of forward then
// backward with NaN-filled outputs, and attention computed naively in 16-bit precision.
#pragma once

#include "cuda_support.hpp"
#include "support/compare.hpp"

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

struct Problem {
  int64_t batch = 1, heads = 2, kv_heads = 2, n_q = 0, n_k = 0, d = 0, e = 0;
  std::vector<float> q, k, v, d_o;
  int64_t q_numel() const { return batch * heads * n_q * d; }
  int64_t k_numel() const { return batch * kv_heads * n_k * d; }
  int64_t v_numel() const { return batch * kv_heads * n_k * e; }
  int64_t o_numel() const { return batch * heads * n_q * e; }
};

inline Problem make_problem(int64_t batch, int64_t heads, int64_t kv_heads, int64_t n_q, int64_t n_k, int64_t d,
                     int64_t e, uint64_t seed) {
  Problem p{batch, heads, kv_heads, n_q, n_k, d, e, {}, {}, {}, {}};
  std::mt19937_64 engine(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto fill = [&](int64_t count, float amplitude) {
    std::vector<float> values(static_cast<size_t>(count));
    for (float& value : values) value = amplitude * uniform(engine);
    return values;
  };
  p.q = fill(p.q_numel(), 2.0f);
  p.k = fill(p.k_numel(), 2.0f);
  p.v = fill(p.v_numel(), 1.0f);
  p.d_o = fill(p.o_numel(), 1.0f);
  return p;
}

// The values a T tensor holds (inputs rounded to T).
template <typename T>
inline float round_to(float x) {
  return spattn::cuda::to_float(spattn::cuda::from_float<T>(x));
}
template <typename T>
std::vector<float> rounded(const std::vector<float>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = round_to<T>(values[i]);
  return out;
}
template <typename T>
inline Problem rounded(const Problem& p) {
  Problem r = p;
  r.q = rounded<T>(p.q);
  r.k = rounded<T>(p.k);
  r.v = rounded<T>(p.v);
  r.d_o = rounded<T>(p.d_o);
  return r;
}

// ---- fp64 truth ---------------------------------------------------------------------------

struct Truth {
  spattn::reference::ForwardResult fwd;
  spattn::reference::BackwardResult bwd;
};

inline Truth truth(const Problem& p, const std::vector<Mask>& masks, double scale) {
  const std::vector<double> q(p.q.begin(), p.q.end()), k(p.k.begin(), p.k.end());
  const std::vector<double> v(p.v.begin(), p.v.end()), d_o(p.d_o.begin(), p.d_o.end());
  using V = TensorView<const double>;
  const V qv = V::contiguous(q.data(), p.batch, p.heads, p.n_q, p.d);
  const V kv = V::contiguous(k.data(), p.batch, p.kv_heads, p.n_k, p.d);
  const V vv = V::contiguous(v.data(), p.batch, p.kv_heads, p.n_k, p.e);
  const V dov = V::contiguous(d_o.data(), p.batch, p.heads, p.n_q, p.e);
  spattn::reference::MaskList<int64_t> list;
  for (const Mask& mask : masks) list.push_back(mask.csr());
  return {spattn::reference::forward(qv, kv, vv, list, scale),
          spattn::reference::backward(qv, kv, vv, dov, list, scale)};
}

// ---- the device run -------------------------------------------------------------------------

struct DeviceOut {
  std::vector<float> o, lse, dq, dk, dv;
  spattn::cuda::DeviceRun forward_run, backward_run;  // what ran
};

template <typename T>
std::vector<T> to_elements(const std::vector<float>& values) {
  std::vector<T> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = spattn::cuda::from_float<T>(values[i]);
  return out;
}
template <typename T>
std::vector<float> to_floats(const std::vector<T>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = spattn::cuda::to_float(values[i]);
  return out;
}
template <typename T>
std::vector<T> nan_filled(int64_t count) {
  return to_elements<T>(std::vector<float>(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN()));
}

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

inline double scale_of(const Problem& p) { return 1.0 / std::sqrt(static_cast<double>(p.d)); }

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


// ---- 16-bit inputs ---------------------------------------------------------------------------

// Attention computed naively in precision T: every product, sum, exp, log and division rounded to
// T as it happens, sums in index order (what a kernel without fp32 accumulation would do).
template <typename T>
DeviceOut naive(const Problem& p, const std::vector<Mask>& masks, float scale) {
  auto r = [](float x) { return round_to<T>(x); };
  DeviceOut out;
  out.o.assign(static_cast<size_t>(p.o_numel()), 0.0f);
  out.lse.assign(static_cast<size_t>(p.batch * p.heads * p.n_q), 0.0f);
  out.dq.assign(static_cast<size_t>(p.q_numel()), 0.0f);
  out.dk.assign(static_cast<size_t>(p.k_numel()), 0.0f);
  out.dv.assign(static_cast<size_t>(p.v_numel()), 0.0f);
  const int64_t group = p.heads / p.kv_heads;
  auto dot = [&](const float* a, const float* b, int64_t n) {
    float s = 0.0f;
    for (int64_t x = 0; x < n; ++x) s = r(s + r(a[x] * b[x]));
    return s;
  };
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const auto csr = masks[masks.size() == 1 ? 0 : static_cast<size_t>(h)].csr();
      const int64_t g = h / group;
      const float* q = p.q.data() + (b * p.heads + h) * p.n_q * p.d;
      const float* k = p.k.data() + (b * p.kv_heads + g) * p.n_k * p.d;
      const float* v = p.v.data() + (b * p.kv_heads + g) * p.n_k * p.e;
      const float* d_o = p.d_o.data() + (b * p.heads + h) * p.n_q * p.e;
      float* o = out.o.data() + (b * p.heads + h) * p.n_q * p.e;
      float* dq = out.dq.data() + (b * p.heads + h) * p.n_q * p.d;
      float* dk = out.dk.data() + (b * p.kv_heads + g) * p.n_k * p.d;
      float* dv = out.dv.data() + (b * p.kv_heads + g) * p.n_k * p.e;
      for (int64_t i = 0; i < p.n_q; ++i) {
        const int64_t begin = csr.row_begin(i), end = csr.row_end(i);
        if (begin == end) continue;
        std::vector<float> s, pr;
        float m = -INFINITY;
        for (int64_t t = begin; t < end; ++t) {
          s.push_back(r(dot(q + i * p.d, k + csr.col_idx[t] * p.d, p.d) * scale));
          m = std::max(m, s.back());
        }
        float l = 0.0f;
        for (float x : s) l = r(l + r(std::exp(r(x - m))));
        const float lse = r(m + r(std::log(l)));
        for (float x : s) pr.push_back(r(std::exp(r(x - lse))));
        for (int64_t x = 0; x < p.e; ++x) {
          float a = 0.0f;
          for (int64_t t = begin; t < end; ++t) a = r(a + r(pr[static_cast<size_t>(t - begin)] * v[csr.col_idx[t] * p.e + x]));
          o[i * p.e + x] = a;
        }
        const float delta = dot(d_o + i * p.e, o + i * p.e, p.e);
        for (int64_t t = begin; t < end; ++t) {
          const int64_t j = csr.col_idx[t];
          const float prob = pr[static_cast<size_t>(t - begin)];
          const float ds = r(prob * r(dot(d_o + i * p.e, v + j * p.e, p.e) - delta));
          for (int64_t x = 0; x < p.d; ++x) dq[i * p.d + x] = r(dq[i * p.d + x] + r(ds * k[j * p.d + x]));
          for (int64_t x = 0; x < p.d; ++x) dk[j * p.d + x] = r(dk[j * p.d + x] + r(ds * q[i * p.d + x]));
          for (int64_t x = 0; x < p.e; ++x) dv[j * p.e + x] = r(dv[j * p.e + x] + r(prob * d_o[i * p.e + x]));
        }
      }
    }
  }
  for (float& x : out.dq) x = r(x * scale);
  for (float& x : out.dk) x = r(x * scale);
  return out;
}


}  // namespace spattn::testing::cuda_attention
