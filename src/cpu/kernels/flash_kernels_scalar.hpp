// The flash steps for tiles narrower than a vector (flash_kernels_impl.hpp hands them here): plain
// loops, one (outer row, inner row) pair at a time, in the order of operations of the vector steps
// at one lane: a score sums head_dim in order from 0; an accumulator is rescaled (the forward's)
// and then adds its inner rows in order. So they give the vector steps' one-lane values, a zero's
// sign aside (a masked pair adds a +0 where those add nothing or a -0; tested against them in
// flash_kernels_scalar_test). The dQ and dK/dV steps keep P and dS in registers, not in the
// score tile, and all of them read their constants from one line (kExpConstantsLine,
// exp_constants.hpp) rather than the compiler's constant pool.
//
// Why not the vector steps at one lane: those keep their register blocks, row ranges and block
// dispatch, about 1 KB of stack frame and 70 KB of code per step. These tiles run only at the
// smallest M, where the tiles themselves are a few dozen 64-byte lines; that much state beside
// them is more than an LRU cache of twice their size holds, and lines the step touches missed
// again at every step (docs/io_model.md, "Against a cache simulator").
//
// Included by flash_kernels_portable.cpp only (the baseline target), inside its namespace.
#pragma once

#include "cpu/kernels/flash_kernels.hpp"
#include "cpu/kernels/flash_kernels_lanes.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE::scalar {

// Whether the pair (outer o, inner i) is attended: a full tile's always, a partial tile's by its
// bit o * bit_stride + i (flash_kernels.hpp).
inline bool attended(const uint64_t* bits, int64_t bit_stride, int64_t o, int64_t i) {
  if (bits == nullptr) return true;
  const int64_t bit = o * bit_stride + i;
  return ((bits[bit >> 6] >> (bit & 63)) & 1u) != 0;
}

// sum_x a[x] b[x stride_b] over x < n, in order from 0.
inline float dot(const float* a, const float* b, int64_t stride_b, int64_t n) {
  float sum = 0.0f;
  for (int64_t x = 0; x < n; ++x) sum += a[x] * b[x * stride_b];
  return sum;
}

// row[x] += w b[x], x < n.
inline void add_scaled(float* row, float w, const float* b, int64_t n) {
  for (int64_t x = 0; x < n; ++x) row[x] += w * b[x];
}

// exp(x), exp_lanes' one-lane value, its constants read from their line.
inline float exp_scalar(float x) { return exp_lanes<Lanes1>(x, kExpConstantsLine); }

// P = exp(scale dot - stat), 0 where stat = -inf (a row that attends nothing).
inline float probability(float dot_product, float scale, float stat) {
  return stat == kExpConstantsLine.neg_inf ? 0.0f : exp_scalar(dot_product * scale - stat);
}

// The forward step (ForwardTile), query row by query row: scores into column o of s, the online
// softmax over them, the rescaled accumulator plus P^T V.
inline void forward(const ForwardTile& t) {
  for (int64_t o = 0; o < t.rows_q; ++o) {
    const float m_old = t.row_max[o];
    float m = m_old;
    for (int64_t i = 0; i < t.rows_k; ++i) {
      const float score = attended(t.bits, t.bit_stride, o, i)
                              ? dot(t.k + i * t.d, t.q_t + o, t.rows_q, t.d) * t.scale
                              : kExpConstantsLine.neg_inf;
      t.s[i * t.rows_q + o] = score;
      m = max_lanes<Lanes1>(m, score);
    }
    const float m_use = m == kExpConstantsLine.neg_inf ? 0.0f : m;
    float sum = 0.0f;
    for (int64_t i = 0; i < t.rows_k; ++i) {
      const float p = exp_scalar(t.s[i * t.rows_q + o] - m_use);
      t.s[i * t.rows_q + o] = p;
      sum += p;
    }
    const float alpha = exp_scalar(m_old - m_use);
    t.row_sum[o] = t.row_sum[o] * alpha + sum;
    t.row_max[o] = m;
    float* acc = t.acc + o * t.e;
    for (int64_t x = 0; x < t.e; ++x) acc[x] = acc[x] * alpha;
    for (int64_t i = 0; i < t.rows_k; ++i) add_scaled(acc, t.s[i * t.rows_q + o], t.v + i * t.e, t.e);
  }
}

// The dQ pass's step (DqTile): per (query o, key i), P, dS = P (V_i . dO_o - D_o), dQ_o += dS K_i.
inline void dq(const DqTile& t) {
  for (int64_t o = 0; o < t.rows_q; ++o) {
    float* dq_row = t.dq + o * t.d;
    for (int64_t i = 0; i < t.rows_k; ++i) {
      float ds = 0.0f;
      if (attended(t.bits, t.bit_stride, o, i)) {
        const float p = probability(dot(t.k + i * t.d, t.q_t + o, t.rows_q, t.d), t.scale, t.lse[o]);
        ds = p * (dot(t.v + i * t.e, t.do_t + o, t.rows_q, t.e) - t.delta[o]);
      }
      add_scaled(dq_row, ds, t.k + i * t.d, t.d);
    }
  }
}

// The dK/dV pass's step (DkdvTile): per (key o, query i), P, dV_o += P dO_i, dS = P (dO_i . V_o -
// D_i), dK_o += dS Q_i; with keep_scores, dS left in s (rows_q, rows_k), as the vector steps leave it.
inline void dkdv(const DkdvTile& t) {
  for (int64_t o = 0; o < t.rows_k; ++o) {
    float* dk_row = t.dk + o * t.d;
    float* dv_row = t.dv + o * t.e;
    for (int64_t i = 0; i < t.rows_q; ++i) {
      float p = 0.0f, ds = 0.0f;
      if (attended(t.bits, t.bit_stride, o, i)) {
        p = probability(dot(t.q + i * t.d, t.k_t + o, t.rows_k, t.d), t.scale, t.lse[i]);
        ds = p * (dot(t.d_o + i * t.e, t.v_t + o, t.rows_k, t.e) - t.delta[i]);
      }
      add_scaled(dv_row, p, t.d_o + i * t.e, t.e);
      add_scaled(dk_row, ds, t.q + i * t.d, t.d);
      if (t.keep_scores) t.s[i * t.rows_k + o] = ds;
    }
  }
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE::scalar
