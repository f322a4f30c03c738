// The CUDA backend against the CPU backend's fp64 reference (spattn::reference, the oracle every
// CPU schedule is tested against): both device algorithms (block-sparse flash, cuSPARSE
// small_cache), forward and backward, seqlens 1, 97, 257 and rectangular shapes, every pattern of
// the library, head_dim 32, 64, 128, grouped-query attention, per-head masks, strided views, a small
// shared-memory budget (many partial tiles), empty masks, determinism; fp32 within the tolerance
// rule of tests/support/compare.hpp, fp16 and bf16 within 2x the error of the same computation done
// naively in that precision (both against fp64 on the rounded inputs).
// Skips, with the reason, where no CUDA device is usable.
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

namespace {

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

Problem make_problem(int64_t batch, int64_t heads, int64_t kv_heads, int64_t n_q, int64_t n_k, int64_t d,
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
float round_to(float x) {
  return spattn::cuda::to_float(spattn::cuda::from_float<T>(x));
}
template <typename T>
std::vector<float> rounded(const std::vector<float>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = round_to<T>(values[i]);
  return out;
}
template <typename T>
Problem rounded(const Problem& p) {
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

Truth truth(const Problem& p, const std::vector<Mask>& masks, double scale) {
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
  spattn::cuda::attention_forward<T>(qv, kv, vv, ov, lsev, masks, options);
  spattn::cuda::attention_backward<T>(qv, kv, vv, ov, lsev, dov, view(dq.data(), p.heads, p.n_q, p.d),
                                      view(dk.data(), p.kv_heads, p.n_k, p.d),
                                      view(dv.data(), p.kv_heads, p.n_k, p.e), masks, options);
  DeviceOut out;
  out.o = from_layout(to_floats(o.download()), p.heads, p.n_q, p.e);
  out.lse = lse.download();
  out.dq = from_layout(to_floats(dq.download()), p.heads, p.n_q, p.d);
  out.dk = from_layout(to_floats(dk.download()), p.kv_heads, p.n_k, p.d);
  out.dv = from_layout(to_floats(dv.download()), p.kv_heads, p.n_k, p.e);
  return out;
}

double scale_of(const Problem& p) { return 1.0 / std::sqrt(static_cast<double>(p.d)); }

void expect_fp32_match(const Problem& p, const std::vector<Mask>& masks, const spattn::cuda::Options& options,
                       bool layout_bshd = false) {
  const Truth t = truth(p, masks, scale_of(p));
  const DeviceOut out = run_device<float>(p, masks, options, layout_bshd);
  const int64_t forward_terms = p.d + p.n_k;
  const int64_t backward_terms = std::max(p.d, p.e) + std::max(p.n_q, p.n_k) * (p.heads / p.kv_heads);
  EXPECT_LE(max_abs_error(out.o, t.fwd.o), fp32_tolerance(forward_terms, max_abs(t.fwd.o)));
  EXPECT_LE(max_abs_error(out.lse, t.fwd.lse), fp32_tolerance(forward_terms, max_abs(t.fwd.lse)));
  EXPECT_LE(max_abs_error(out.dq, t.bwd.dq), fp32_tolerance(backward_terms, max_abs(t.bwd.dq)));
  EXPECT_LE(max_abs_error(out.dk, t.bwd.dk), fp32_tolerance(backward_terms, max_abs(t.bwd.dk)));
  EXPECT_LE(max_abs_error(out.dv, t.bwd.dv), fp32_tolerance(backward_terms, max_abs(t.bwd.dv)));
  bool attends = false;
  for (const Mask& mask : masks) attends = attends || mask.nnz() > 0;
  if (attends) {  // non-trivial outputs
    EXPECT_GT(max_abs(t.fwd.o), 0.0);
    EXPECT_GT(max_abs(t.bwd.dv), 0.0);
  }
}

spattn::cuda::Options options_for(CudaAlgorithm algorithm, int64_t smem_bytes = 0) {
  spattn::cuda::Options options;
  options.algorithm = algorithm;
  options.shared_memory_bytes = smem_bytes;
  return options;
}

std::string label(const std::string& spec, const Problem& p, CudaAlgorithm algorithm) {
  return spec + " at " + std::to_string(p.n_q) + " x " + std::to_string(p.n_k) + ", d " + std::to_string(p.d) +
         ", e " + std::to_string(p.e) + ", " + spattn::cuda::cuda_algorithm_name(algorithm);
}

// Both algorithms, or those SPATTN_CUDA_TEST_ALGORITHMS names ("flash": the CPU emulation of the
// flash kernels, tests/cuda_emulation/run.sh, has no cuSPARSE).
std::vector<CudaAlgorithm> algorithms() {
  const char* only = std::getenv("SPATTN_CUDA_TEST_ALGORITHMS");
  std::vector<CudaAlgorithm> result;
  for (const CudaAlgorithm algorithm : {CudaAlgorithm::flash, CudaAlgorithm::small_cache}) {
    if (only == nullptr || std::string(only).find(spattn::cuda::cuda_algorithm_name(algorithm)) != std::string::npos) {
      result.push_back(algorithm);
    }
  }
  return result;
}
bool tested(CudaAlgorithm algorithm) {
  const auto all = algorithms();
  return std::find(all.begin(), all.end(), algorithm) != all.end();
}

TEST_F(CudaAttention, Fp32MatchesTheReferenceOnEveryPatternAndShape) {
  struct Shape {
    int64_t n_q, n_k, d, e;
  };
  const Shape shapes[] = {{1, 1, 32, 32}, {97, 97, 64, 64}, {97, 257, 32, 32}, {257, 97, 32, 64}, {257, 257, 32, 32}};
  for (const Shape& s : shapes) {
    const Problem p = make_problem(1, 2, 2, s.n_q, s.n_k, s.d, s.e, static_cast<uint64_t>(s.n_q * 1000 + s.n_k));
    std::vector<std::string> specs = spattn::testing::cuda_pattern_specs(s.n_q, s.n_k);
    specs.push_back("full");
    for (const std::string& spec : specs) {
      const Mask mask = spec == "full" ? Mask::full(s.n_q, s.n_k) : spattn::testing::mask_of(spec, s.n_q, s.n_k);
      for (const CudaAlgorithm algorithm : algorithms()) {
        SCOPED_TRACE(label(spec, p, algorithm));
        expect_fp32_match(p, {mask}, options_for(algorithm));
      }
    }
  }
}

TEST_F(CudaAttention, HeadDim128AndASmallSharedMemoryBudget) {
  const Problem p = make_problem(1, 2, 2, 257, 257, 128, 128, 128);
  for (const std::string spec : {"sliding_window:w=16", "bigbird:block=16,w=1,g=1,r=2,seed=3", "random:p=0.1,seed=2", "full"}) {
    const Mask mask = spec == "full" ? Mask::full(257, 257) : Mask::from_spec(spec, 257, 257);
    for (const int64_t smem : {int64_t{0}, int64_t{48 * 1024}}) {
      SCOPED_TRACE(label(spec, p, CudaAlgorithm::flash) + ", shared memory " + std::to_string(smem));
      expect_fp32_match(p, {mask}, options_for(CudaAlgorithm::flash, smem));
    }
    if (tested(CudaAlgorithm::small_cache)) {
      SCOPED_TRACE(label(spec, p, CudaAlgorithm::small_cache));
      expect_fp32_match(p, {mask}, options_for(CudaAlgorithm::small_cache));
    }
  }
  // 12 KiB: the d = 64 tiles become a few rows, most of a window's tiles are partial.
  const Problem small = make_problem(1, 1, 1, 257, 257, 64, 64, 64);
  SCOPED_TRACE("12 KiB");
  expect_fp32_match(small, {Mask::from_spec("sliding_window:w=20,causal=1", 257, 257)},
                    options_for(CudaAlgorithm::flash, 12 * 1024));
}

TEST_F(CudaAttention, GroupedQueryAttentionPerHeadMasksAndStridedViews) {
  const Problem p = make_problem(2, 4, 2, 97, 131, 32, 32, 42);
  const std::vector<Mask> per_head{Mask::from_spec("sliding_window:w=8", 97, 131), Mask::from_spec("random:p=0.2,seed=1", 97, 131),
                                   Mask::from_spec("causal", 97, 131), Mask::from_spec("strided:stride=16", 97, 131)};
  const Mask shared = Mask::from_spec("bigbird:block=16,seed=5", 97, 131);
  for (const CudaAlgorithm algorithm : algorithms()) {
    SCOPED_TRACE(spattn::cuda::cuda_algorithm_name(algorithm));
    expect_fp32_match(p, per_head, options_for(algorithm));
    expect_fp32_match(p, {shared}, options_for(algorithm));
    expect_fp32_match(p, {shared}, options_for(algorithm), /*layout_bshd=*/true);
  }
}

TEST_F(CudaAttention, EmptyMasksGiveZeroOutputsAndMinusInfinityLse) {
  const Problem p = make_problem(1, 2, 2, 97, 97, 32, 32, 5);
  const Mask empty = Mask::from_csr(sparse_formats::CsrPattern<int64_t>::empty(97, 97));
  // Rows 0..9 attend nothing, the others are causal; keys 90..96 are attended by nobody.
  sparse_formats::CsrPattern<int64_t> rows = sparse_formats::CsrPattern<int64_t>::empty(97, 97);
  rows.row_ptr.assign(1, 0);
  for (int64_t i = 0; i < 97; ++i) {
    for (int64_t j = 0; i >= 10 && j <= std::min<int64_t>(i, 89); ++j) rows.col_idx.push_back(j);
    rows.row_ptr.push_back(static_cast<int64_t>(rows.col_idx.size()));
  }
  const Mask some_empty = Mask::from_csr(std::move(rows));
  for (const CudaAlgorithm algorithm : algorithms()) {
    SCOPED_TRACE(spattn::cuda::cuda_algorithm_name(algorithm));
    const DeviceOut out = run_device<float>(p, {empty}, options_for(algorithm));
    for (float x : out.o) ASSERT_EQ(x, 0.0f);
    for (float x : out.lse) ASSERT_EQ(x, -std::numeric_limits<float>::infinity());
    for (float x : out.dq) ASSERT_EQ(x, 0.0f);
    for (float x : out.dk) ASSERT_EQ(x, 0.0f);
    for (float x : out.dv) ASSERT_EQ(x, 0.0f);
    expect_fp32_match(p, {some_empty}, options_for(algorithm));
  }
}

TEST_F(CudaAttention, FlashRunsAreBitIdentical) {
  const Problem p = make_problem(1, 2, 2, 257, 257, 64, 64, 9);
  const Mask mask = Mask::from_spec("bigbird:block=16,w=1,g=1,r=2,seed=3", 257, 257);
  const DeviceOut a = run_device<float>(p, {mask}, options_for(CudaAlgorithm::flash));
  const DeviceOut b = run_device<float>(p, {mask}, options_for(CudaAlgorithm::flash));
  auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same(a.o, b.o) && same(a.lse, b.lse));
  EXPECT_TRUE(same(a.dq, b.dq) && same(a.dk, b.dk) && same(a.dv, b.dv));
}

TEST_F(CudaAttention, ASharedMemoryBudgetAboveTheDevicesIsRefused) {
  const Problem p = make_problem(1, 1, 1, 7, 7, 32, 32, 1);
  const int64_t too_much = spattn::cuda::shared_memory_per_block() + 4;
  EXPECT_THROW(run_device<float>(p, {Mask::full(7, 7)}, options_for(CudaAlgorithm::flash, too_much)),
               spattn::InvalidArgument);
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

template <typename T>
void expect_within_twice_naive(const char* type) {
  struct Case {
    int64_t n_q, n_k, d;
    const char* spec;
  };
  const Case cases[] = {{97, 257, 64, "sliding_window:w=16"},
                        {257, 257, 128, "bigbird:block=16,w=1,g=1,r=2,seed=3"},
                        {257, 257, 64, "full"},
                        {257, 97, 32, "random:p=0.1,seed=2"}};
  for (const Case& c : cases) {
    const Problem p = rounded<T>(make_problem(1, 2, 2, c.n_q, c.n_k, c.d, c.d, static_cast<uint64_t>(c.n_q + c.d)));
    const Mask mask = std::string(c.spec) == "full" ? Mask::full(c.n_q, c.n_k) : Mask::from_spec(c.spec, c.n_q, c.n_k);
    const float scale = static_cast<float>(scale_of(p));
    const Truth t = truth(p, {mask}, scale);
    const DeviceOut lazy = naive<T>(p, {mask}, scale);
    for (const CudaAlgorithm algorithm : algorithms()) {
      SCOPED_TRACE(std::string(type) + ": " + label(c.spec, p, algorithm));
      const DeviceOut out = run_device<T>(p, {mask}, options_for(algorithm));
      const std::pair<const std::vector<float>*, const std::vector<float>*> pairs[] = {
          {&out.o, &lazy.o}, {&out.dq, &lazy.dq}, {&out.dk, &lazy.dk}, {&out.dv, &lazy.dv}};
      const std::vector<double>* exact[] = {&t.fwd.o, &t.bwd.dq, &t.bwd.dk, &t.bwd.dv};
      const char* names[] = {"o", "dq", "dk", "dv"};
      for (int i = 0; i < 4; ++i) {
        const double device_error = max_abs_error(*pairs[i].first, *exact[i]);
        const double naive_error = max_abs_error(*pairs[i].second, *exact[i]);
        EXPECT_GT(naive_error, 0.0) << names[i];
        EXPECT_LE(device_error, 2.0 * naive_error) << names[i] << ": device " << device_error << ", naive " << naive_error;
      }
      // LSE is fp32 on the device: the fp32 rule holds for it.
      EXPECT_LE(max_abs_error(out.lse, t.fwd.lse), fp32_tolerance(p.d + p.n_k, max_abs(t.fwd.lse)));
    }
  }
}

TEST_F(CudaAttention, HalfPrecisionIsWithinTwiceTheNaiveError) { expect_within_twice_naive<half_t>("fp16"); }
TEST_F(CudaAttention, Bfloat16IsWithinTwiceTheNaiveError) { expect_within_twice_naive<bfloat16_t>("bf16"); }

}  // namespace
