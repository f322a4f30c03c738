// 16-bit attention for the tests of both backends (the CPU's element_types_test.cpp, the CUDA
// half-precision tests): random problems, their inputs rounded to fp16 / bf16, the fp64 truth from
// spattn::reference, attention computed naively in 16-bit precision, and FlashAttention's rule
// that compares the two: a backend's error against fp64 at most twice the naive computation's.
#pragma once

#include "support/compare.hpp"

#include <spattn/elements.hpp>
#include <spattn/mask.hpp>
#include <spattn/reference.hpp>
#include <spattn/tensor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace spattn::testing::half_precision {

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
  return spattn::to_float(spattn::from_float<T>(x));
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

// A run's outputs as floats, (batch, heads, seqlen, dim) order.
struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
};

template <typename T>
std::vector<T> to_elements(const std::vector<float>& values) {
  std::vector<T> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = spattn::from_float<T>(values[i]);
  return out;
}
template <typename T>
std::vector<float> to_floats(const std::vector<T>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = spattn::to_float(values[i]);
  return out;
}
template <typename T>
std::vector<T> nan_filled(int64_t count) {
  return to_elements<T>(std::vector<float>(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN()));
}

inline double scale_of(const Problem& p) { return 1.0 / std::sqrt(static_cast<double>(p.d)); }

// Attention computed naively in precision T: every product, sum, exp, log and division rounded to
// T as it happens, sums in index order (what a kernel without fp32 accumulation would do).
template <typename T>
Outputs naive(const Problem& p, const std::vector<Mask>& masks, float scale) {
  auto r = [](float x) { return round_to<T>(x); };
  Outputs out;
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

// FlashAttention's rule for one run of `masks` over the rounded problem `p`: each of O, dQ, dK, dV
// within 2x the naive 16-bit computation's error against fp64 (with the fp32 rule as a floor:
// where the naive computation happens to be exact, e.g. a row of one key, a backend still computes
// in fp32), LSE within the fp32 rule; and the outputs non-trivial where the masks attend anything.
inline void expect_half_precision_rule(const Problem& p, const std::vector<Mask>& masks, const Outputs& run,
                                      const Outputs& lazy, const Truth& t) {
  const int64_t forward_terms = p.d + p.n_k;
  const int64_t backward_terms = std::max(p.d, p.e) + std::max(p.n_q, p.n_k) * (p.heads / p.kv_heads);
  struct Output {
    const char* name;
    const std::vector<float>& run;
    const std::vector<float>& naive;
    const std::vector<double>& exact;
    int64_t terms;
  };
  const Output outputs[] = {{"o", run.o, lazy.o, t.fwd.o, forward_terms},
                            {"dq", run.dq, lazy.dq, t.bwd.dq, backward_terms},
                            {"dk", run.dk, lazy.dk, t.bwd.dk, backward_terms},
                            {"dv", run.dv, lazy.dv, t.bwd.dv, backward_terms}};
  for (const Output& x : outputs) {
    const double run_error = max_abs_error(x.run, x.exact);
    const double naive_error = max_abs_error(x.naive, x.exact);
    const double bound = std::max(2.0 * naive_error, fp32_tolerance(x.terms, max_abs(x.exact)));
    EXPECT_LE(run_error, bound) << x.name << ": run " << run_error << ", naive " << naive_error;
  }
  EXPECT_LE(max_abs_error(run.lse, t.fwd.lse), fp32_tolerance(forward_terms, max_abs(t.fwd.lse)));
  bool attends = false;
  for (const Mask& mask : masks) attends = attends || mask.nnz() > 0;
  if (attends) {  // non-trivial outputs
    EXPECT_GT(max_abs(t.fwd.o), 0.0);
    EXPECT_GT(max_abs(t.bwd.dv), 0.0);
  }
}

}  // namespace spattn::testing::half_precision
