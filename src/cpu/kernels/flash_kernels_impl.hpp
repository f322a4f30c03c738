// The flash kernels' steps (flash_kernels.hpp): the masks, the online softmax and the forward,
// dQ and dK/dV steps, over the products of flash_kernels_products.hpp and
// flash_kernels_accumulate.hpp, written once over a configuration (a lane type and the vector
// registers a register block may take). Included by one translation unit per instruction set
// (flash_kernels_lanes.hpp says why).
//
// Order of operations (what makes a result independent of threads and of how a tile is blocked):
// a score product sums head_dim in K interleaved partial sums (x = k mod K), combined by a fixed
// pairwise tree, K set by the block shape so that enough multiply-adds are in flight; an
// accumulator adds its inner rows in order, after the forward's rescaling.
#pragma once

#include "cpu/kernels/flash_kernels_accumulate.hpp"

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

// ---- masks and the online softmax -----------------------------------------------------------

// s[i][o] = fill where the partial tile's bit (o, i) is clear. The bits of one outer row are
// contiguous (o * bit_stride + i): each row's field is read once, for up to 64 outer rows at a
// time, and then s is written row i by row i, contiguously along o with a branch-free select
// (the compiler vectorizes it); an inner row every field attends is skipped. (It wrote s column
// by column, one strided store per cleared bit: on a uniform random mask, where every tile is
// partial and most bits are clear, that cost flash as much as the tile's products.)
SPATTN_KERNEL_INLINE void apply_bits(float* s, int64_t rows_i, int64_t rows_o, const uint64_t* bits,
                                     int64_t bit_stride, float fill) {
  if (rows_i > 64) {  // wider than a word (only when the inner tile is): bit by bit
    for (int64_t o = 0; o < rows_o; ++o) {
      for (int64_t i = 0; i < rows_i; ++i) {
        const int64_t bit = o * bit_stride + i;
        if (((bits[bit >> 6] >> (bit & 63)) & 1u) == 0) s[i * rows_o + o] = fill;
      }
    }
    return;
  }
  const uint64_t all = rows_i == 64 ? ~uint64_t{0} : (uint64_t{1} << rows_i) - 1;
  constexpr int64_t kOuterGroup = 64;
  uint64_t fields[kOuterGroup];
  for (int64_t o0 = 0; o0 < rows_o; o0 += kOuterGroup) {
    const int64_t count = rows_o - o0 < kOuterGroup ? rows_o - o0 : kOuterGroup;
    uint64_t every = all;  // bit i: every outer row of the group attends inner row i
    for (int64_t g = 0; g < count; ++g) {
      fields[g] = outer_row_bits(bits, bit_stride, o0 + g, rows_i);
      every &= fields[g];
    }
    for (int64_t i = 0; i < rows_i; ++i) {
      if ((every >> i) & 1u) continue;
      float* row = s + i * rows_o + o0;
      for (int64_t g = 0; g < count; ++g) row[g] = ((fields[g] >> i) & 1u) != 0 ? row[g] : fill;
    }
  }
}

// The online-softmax update of the query rows [start + first, start + kLanes) (forward_tile's
// comment) over the key rows `keys` (the rest of the tile is masked for these rows: -inf scores,
// which change neither the maximum nor the sum); lanes below `first` belong to the chunk before
// and are left as they are. P overwrites S on the rows of `keys`, and alpha = e^{m - m'} goes to
// `alpha` (kLanes floats, lane l for row start + l). A row with m' = -inf (nothing attended yet)
// computes with m' taken as 0: P = 0, alpha = 0, l and acc stay 0.
template <typename L>
SPATTN_KERNEL_INLINE void softmax_lanes(float* s, int64_t lds, RowRange keys, int64_t start,
                                        int64_t first, float* row_max, float* row_sum, float* alpha) {
  using V = typename L::V;
  const V m_old = load<L>(row_max + start);
  V m = m_old;
  for (int64_t i = keys.begin; i < keys.end; ++i) m = max_lanes<L>(m, load<L>(s + i * lds + start));
  const V m_use = m == splat<L>(kNegInf) ? splat<L>(0.0f) : m;
  V sum = splat<L>(0.0f);
  for (int64_t i = keys.begin; i < keys.end; ++i) {
    float* row = s + i * lds + start;
    const V old = load<L>(row);
    const V p = exp_lanes<L>(old - m_use);
    store<L>(row, keep_below<L>(first, old, p));
    sum += p;
  }
  const V scale = exp_lanes<L>(m_old - m_use);
  store<L>(alpha, scale);
  const V l_old = load<L>(row_sum + start);
  store<L>(row_sum + start, keep_below<L>(first, l_old, l_old * scale + sum));
  store<L>(row_max + start, keep_below<L>(first, m_old, m));
}

// ---- the three steps ------------------------------------------------------------------------

template <typename Cfg>
SPATTN_KERNEL_INLINE void forward_step(const ForwardTile& t) {
  using L = typename Cfg::L;
  constexpr int64_t W = L::kLanes;
  if constexpr (W > 1) {
    if (t.rows_q < W) return isa::forward_scalar(t);
  }
  // A partial tile computes only the query rows each block of keys attends (flash_kernels_ranges.hpp).
  RowRange range_storage[kMaxRangeBlocks];
  const RowRange* ranges = attended_ranges(t.bits, t.bit_stride, t.rows_k, t.rows_q, range_storage);
  // S = scale K Q^T: (rows_k, rows_q)
  score_product_of<Cfg>(t.k, t.rows_k, t.q_t, t.q_packed, t.rows_q, t.d,
                        {Epilogue::scale, false, t.scale, nullptr}, t.s, ranges);
  if (t.bits != nullptr) apply_bits(t.s, t.rows_k, t.rows_q, t.bits, t.bit_stride, kNegInf);
  // Per chunk of query rows: the softmax statistics, then acc = acc alpha + P^T V over the keys
  // the chunk attends (P is 0 on the others).
  float alpha[W];
  for (int64_t o0 = 0; o0 < t.rows_q; o0 += W) {
    const int64_t start = o0 + W <= t.rows_q ? o0 : t.rows_q - W;
    const int64_t first = o0 - start;
    const RowRange keys = t.bits == nullptr ? RowRange{0, t.rows_k}
                                            : attended_inner_rows(t.bits, t.bit_stride, t.rows_k, o0, start + W);
    softmax_lanes<L>(t.s, t.rows_q, keys, start, first, t.row_max, t.row_sum, alpha);
    // (float32 even on pairs: O rounded through P would carry P's rounding into D = rowsum(dO ∘ O),
    // and through it into every dS of the row.)
    accumulate_product<Cfg>(t.acc + o0 * t.e, W - first, t.e, t.s + keys.begin * t.rows_q + o0, t.rows_q,
                            keys.end - keys.begin, t.v + keys.begin * t.e, alpha + first);
  }
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void dq_step(const DqTile& t) {
  if constexpr (Cfg::L::kLanes > 1) {
    if (t.rows_q < Cfg::L::kLanes) return isa::dq_scalar(t);
  }
  // A partial tile computes only the query rows each block of keys attends (flash_kernels_ranges.hpp).
  RowRange range_storage[kMaxRangeBlocks];
  const RowRange* ranges = attended_ranges(t.bits, t.bit_stride, t.rows_k, t.rows_q, range_storage);
  // P = exp(scale K Q^T - LSE): (rows_k, rows_q), LSE per query (outer) row
  score_product_of<Cfg>(t.k, t.rows_k, t.q_t, t.q_packed, t.rows_q, t.d,
                        {Epilogue::probability, false, t.scale, t.lse}, t.s, ranges);
  if (t.bits != nullptr) apply_bits(t.s, t.rows_k, t.rows_q, t.bits, t.bit_stride, 0.0f);
  // dS = P ∘ (V dO^T - D) (0 where P is: those entries keep apply_bits' 0)
  score_product_of<Cfg>(t.v, t.rows_k, t.do_t, t.do_packed, t.rows_q, t.e,
                        {Epilogue::gradient, false, t.scale, t.delta}, t.s, ranges);
  // dQ += dS^T K
  backward_product_of<Cfg>(t.q_packed || t.do_packed, t.dq, t.rows_q, t.d, t.s, t.rows_q, t.rows_k, t.k, ranges);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void dkdv_step(const DkdvTile& t) {
  if constexpr (Cfg::L::kLanes > 1) {
    if (t.rows_k < Cfg::L::kLanes) return isa::dkdv_scalar(t);
  }
  // A partial tile computes only the key rows each block of queries attends (flash_kernels_ranges.hpp).
  RowRange range_storage[kMaxRangeBlocks];
  const RowRange* ranges = attended_ranges(t.bits, t.bit_stride, t.rows_q, t.rows_k, range_storage);
  const bool pairs = t.k_packed || t.v_packed;
  // P = exp(scale Q K^T - LSE): (rows_q, rows_k), LSE per query (inner) row
  score_product_of<Cfg>(t.q, t.rows_q, t.k_t, t.k_packed, t.rows_k, t.d,
                        {Epilogue::probability, true, t.scale, t.lse}, t.s, ranges);
  if (t.bits != nullptr) apply_bits(t.s, t.rows_q, t.rows_k, t.bits, t.bit_stride, 0.0f);
  // dV += P^T dO
  backward_product_of<Cfg>(pairs, t.dv, t.rows_k, t.e, t.s, t.rows_k, t.rows_q, t.d_o, ranges);
  // dS = P ∘ (dO V^T - D) (0 where P is: those entries keep apply_bits' 0)
  score_product_of<Cfg>(t.d_o, t.rows_q, t.v_t, t.v_packed, t.rows_k, t.e,
                        {Epilogue::gradient, true, t.scale, t.delta}, t.s, ranges);
  // dK += dS^T Q
  backward_product_of<Cfg>(pairs, t.dk, t.rows_k, t.d, t.s, t.rows_k, t.rows_q, t.q, ranges);
}

template <typename Cfg>
SPATTN_KERNEL_INLINE void dq_from_scores_step(const DqFromScoresTile& t) {
  // dS^T: (rows_k, rows_q), the w of acc += w^T b
  for (int64_t i = 0; i < t.rows_q; ++i) {
    const float* row = t.s + i * t.rows_k;
    for (int64_t c = 0; c < t.rows_k; ++c) t.s_t[c * t.rows_q + i] = row[c];
  }
  // dQ += dS K
  RowRange range_storage[kMaxKeyBlocks];
  const RowRange* ranges = attended_query_ranges(t.bits, t.bit_stride, t.rows_k, t.rows_q, range_storage);
  accumulate_product<Cfg>(t.dq, t.rows_q, t.d, t.s_t, t.rows_q, t.rows_k, t.k, nullptr, ranges);
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
