// The products over bfloat16 pairs (flash_kernels.hpp, "bfloat16 pairs"): AVX512_BF16's
// vdpbf16ps multiplies 16 lanes of two bfloat16s each and adds both products to a float32 sum,
// twice the multiply-adds of an FMA per instruction. Included only by the translation unit of the
// avx512_bf16 set (flash_kernels_avx512_bf16.cpp), after flash_kernels_impl.hpp.
//
// A score product's operands hold bfloat16 values exactly (a bfloat16 call's tiles were widened
// from them), so the conversions to pairs lose nothing, and the products are exact in float32; only
// the sums round, as an FMA's do (an accumulating product's weights, P and dS, are rounded first:
// accumulate_product_pairs). vdpbf16ps takes bfloat16 subnormals as 0 and flushes subnormal results
// (below 1.2e-38) to 0. Sums run over pairs of head_dim in a fixed order, so a result is a fixed
// function of the tile shapes, as in every set.
#pragma once

#include "cpu/kernels/flash_kernels_impl.hpp"

#include <immintrin.h>

#include <cstdint>

namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE {

// The multiply-add of a score product over bfloat16 pairs (score_block's Product): one pair of a
// (broadcast to every lane) against a vector of 16 pairs of bt's pair row. vdpbf16ps has a longer
// latency than an FMA: on a Zen 5 core 12 independent chains ran it at 60 % of its rate and 20 at
// all of it, so a block aims for 16.
struct PairProduct {
  using L = Lanes16;
  using Element = uint32_t;  // two bfloat16s: element 2x in the low half, 2x + 1 in the high
  using B = __m512i;
  static constexpr int kChains = 16;
  static SPATTN_KERNEL_INLINE B load_b(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static SPATTN_KERNEL_INLINE void madd(L::V& acc, uint32_t a, B b) {
    acc = (L::V)_mm512_dpbf16_ps((__m512)acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(a)), (__m512bh)b);
  }
  static SPATTN_KERNEL_INLINE L::V mul(uint32_t a, B b) {
    L::V product = splat<L>(0.0f);
    madd(product, a, b);
    return product;
  }
};

// Lanes [0, count) of 16, count <= 16.
SPATTN_KERNEL_INLINE __mmask16 first_lanes(int64_t count) {
  return static_cast<__mmask16>(count >= 16 ? 0xffff : (1u << count) - 1);
}

// Rows `low` and `high` (nullptr: 0) of `rows` floats as pairs rounded to bfloat16 (to nearest
// even; exact where they hold bfloat16 values): pairs[r] holds (low[r], high[r]). Each 16 pairs
// are written after their 16 floats of both rows are read, so pairs may start where low does.
SPATTN_KERNEL_INLINE void rounded_pairs(const float* low, const float* high, int64_t rows, uint32_t* pairs) {
  // vcvtne2ps2bf16 puts low's 16 values, then high's, in one vector; the permutation interleaves them.
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t r = 0; r < rows; r += 16) {
    const __mmask16 lanes = first_lanes(rows - r);
    const __m512 high_values = high != nullptr ? _mm512_maskz_loadu_ps(lanes, high + r) : _mm512_setzero_ps();
    const __m512bh both = _mm512_cvtne2ps_pbh(high_values, _mm512_maskz_loadu_ps(lanes, low + r));
    _mm512_mask_storeu_epi32(pairs + r, lanes, _mm512_permutexvar_epi16(interleave, (__m512i)both));
  }
}

// A row of `width` floats as ceil(width / 2) pairs (0 in the high half past an odd width).
SPATTN_KERNEL_INLINE void row_to_pairs(const float* row, int64_t width, uint32_t* pairs) {
  int64_t x = 0;
  for (; x + 32 <= width; x += 32) {
    const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + x + 16), _mm512_loadu_ps(row + x));
    _mm512_storeu_si512(pairs + x / 2, (__m512i)both);
  }
  if (x < width) {
    const int64_t left = width - x;  // 1 .. 31
    const __mmask16 high = left > 16 ? first_lanes(left - 16) : 0;
    const __m512bh both = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, row + x + 16),
                                              _mm512_maskz_loadu_ps(first_lanes(left), row + x));
    _mm512_mask_storeu_epi32(pairs + x / 2, first_lanes((left + 1) / 2), (__m512i)both);
  }
}

// flash_kernels.hpp, pack_bf16_pairs. In place: pair row p takes the bytes of float row p, which
// pair row p / 2 < p has read already (and pair row 0 reads each vector of float rows 0 and 1
// before it writes over it: rounded_pairs).
inline const uint32_t* pack_pairs_in_place(float* tile, int64_t width, int64_t rows) {
  uint32_t* pairs = reinterpret_cast<uint32_t*>(tile);
  for (int64_t p = 0; p < (width + 1) / 2; ++p) {
    const float* low_row = tile + 2 * p * rows;
    rounded_pairs(low_row, 2 * p + 1 < width ? low_row + rows : nullptr, rows, pairs + p * rows);
  }
  return pairs;
}

// flash_kernels_products.hpp, score_product_pairs: score_product with the inner rows converted to
// pairs a block at a time (the outer operand came packed). Not inlined: inlined into a step, GCC
// 12 spilled the step's accumulators (the pair steps ran 1.7x slower).
template <typename Cfg>
__attribute__((noinline)) void score_product_pairs(const float* a, int64_t rows_i, const uint32_t* bt_pairs,
                                                   int64_t rows_o, int64_t width, EpilogueSpec e, float* s,
                                                   const RowRange* ranges) {
  static_assert(Cfg::kBf16Pairs && Cfg::L::kLanes == 16, "bfloat16 pairs fill 16 float32 lanes");
  constexpr int64_t W = Cfg::L::kLanes;
  const int64_t pairs = (width + 1) / 2;
  uint32_t a_pairs[kMaxBlockRows * (kMaxPairWidth / 2)];
  const float* stats = e.stats;
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    const int64_t n = rows_i - i0 < kMaxBlockRows ? rows_i - i0 : kMaxBlockRows;
    int64_t chunk_begin, chunk_end;
    if (!chunks_of_block<W>(ranges, i0, rows_o, chunk_begin, chunk_end)) continue;
    for (int64_t r = 0; r < n; ++r) row_to_pairs(a + (i0 + r) * width, width, a_pairs + r * pairs);
    if (e.stats_on_inner) e.stats = stats + i0;
    score_block_rows<Cfg, PairProduct>(n, a_pairs, bt_pairs, rows_o, pairs, e, s + i0 * rows_o, chunk_begin,
                                       chunk_end);
  }
}

// ---- accumulating products over pairs of inner rows -------------------------------------------

// 16 pairs of b's inner rows `low` and `high` (nullptr: past an odd count, 0): lane x holds
// element x of `low` in its low 16 bits and of `high` in its high ones. b holds bfloat16 values
// exactly (a bfloat16 call's tiles), so the pairs are the floats' high halves: no rounding.
SPATTN_KERNEL_INLINE __m512i exact_pairs(const float* low, const float* high, __mmask16 lanes) {
  typedef uint32_t Bits32 __attribute__((vector_size(64)));  // (shifts as vector types: pack_pairs_in_place)
  const Bits32 low_bits = (Bits32)_mm512_maskz_loadu_epi32(lanes, low) >> 16;
  if (high == nullptr) return (__m512i)low_bits;
  const Bits32 high_bits = (Bits32)_mm512_maskz_loadu_epi32(lanes, high) & 0xffff0000u;
  return (__m512i)(low_bits | high_bits);
}

// acc rows [0, rows_o), columns [x0, x0 + 16 X) (the last vector's `tail` lanes alone when Tail)
// += the P pairs of inner rows of b (b_rows of them, at stride cols) weighted by w_pairs (P,
// ld_pairs). The P X pair vectors of b stay in registers while the accumulator rows stream past
// them, as accumulate_streamed's rows do.
template <int P, int X, bool Tail>
SPATTN_KERNEL_INLINE void accumulate_pairs_block(float* SPATTN_RESTRICT acc, int64_t rows_o, int64_t cols,
                                                 int64_t x0, __mmask16 tail,
                                                 const uint32_t* SPATTN_RESTRICT w_pairs, int64_t ld_pairs,
                                                 const float* SPATTN_RESTRICT b, int64_t b_rows) {
  __m512i inner[P * X];  // inner[p X + v]: pair p of b's rows, vector v
  SPATTN_UNROLL for (int j = 0; j < P * X; ++j) {
    const int p = j / X, v = j % X;
    const float* low = b + 2 * p * cols + x0 + 16 * v;
    inner[j] = exact_pairs(low, 2 * p + 1 < b_rows ? low + cols : nullptr, Tail && v == X - 1 ? tail : 0xffff);
  }
  for (int64_t o = 0; o < rows_o; ++o) {
    float* row = acc + o * cols + x0;
    __m512 t[X];
    SPATTN_UNROLL for (int v = 0; v < X; ++v) {
      t[v] = Tail && v == X - 1 ? _mm512_maskz_loadu_ps(tail, row + 16 * v) : _mm512_loadu_ps(row + 16 * v);
    }
    SPATTN_UNROLL for (int j = 0; j < P * X; ++j) {  // pair by pair, in order
      const __m512i weight = _mm512_set1_epi32(static_cast<int>(w_pairs[(j / X) * ld_pairs + o]));
      t[j % X] = _mm512_dpbf16_ps(t[j % X], (__m512bh)weight, (__m512bh)inner[j]);
    }
    SPATTN_UNROLL for (int v = 0; v < X; ++v) {
      if (Tail && v == X - 1) {
        _mm512_mask_storeu_ps(row + 16 * v, tail, t[v]);
      } else {
        _mm512_storeu_ps(row + 16 * v, t[v]);
      }
    }
  }
}

// Every column of rows [0, rows_o), X vectors at a time, the last partial vector masked.
template <int P>
SPATTN_KERNEL_INLINE void accumulate_pairs_rows(float* acc, int64_t rows_o, int64_t cols, const uint32_t* w_pairs,
                                                int64_t ld_pairs, const float* b, int64_t b_rows) {
  int64_t x0 = 0;
  for (; x0 + 64 <= cols; x0 += 64) {
    accumulate_pairs_block<P, 4, false>(acc, rows_o, cols, x0, 0xffff, w_pairs, ld_pairs, b, b_rows);
  }
  for (; x0 + 16 <= cols; x0 += 16) {
    accumulate_pairs_block<P, 1, false>(acc, rows_o, cols, x0, 0xffff, w_pairs, ld_pairs, b, b_rows);
  }
  if (x0 < cols) {
    accumulate_pairs_block<P, 1, true>(acc, rows_o, cols, x0, first_lanes(cols - x0), w_pairs, ld_pairs, b, b_rows);
  }
}

// flash_kernels_accumulate.hpp, accumulate_product_pairs: acc (rows_o, cols) += w^T b with w's
// values rounded to bfloat16 (the backward's P and dS, as FlashAttention's GPU kernels round them)
// and the inner rows added two at a time (vdpbf16ps), in blocks of kMaxBlockRows inner rows as
// the float32 streamed order has them: within a block pairs (0, 1), (2, 3), ..., so a sum is a
// fixed function of the tile shapes. With `ranges` a block updates only its attended outer rows,
// where w is 0 elsewhere. Not inlined, as score_product_pairs.
template <typename Cfg>
__attribute__((noinline)) void accumulate_product_pairs(float* acc, int64_t rows_o, int64_t cols, const float* w,
                                                        int64_t ldw, int64_t rows_i, const float* b,
                                                        const RowRange* ranges) {
  static_assert(Cfg::kBf16Pairs && kMaxBlockRows == 8, "blocks of 8 inner rows make 4 pairs");
  constexpr int64_t kOuterPiece = 256;  // outer rows whose pairs of w are held at once
  uint32_t w_pairs[(kMaxBlockRows / 2) * kOuterPiece];
  for (int64_t i0 = 0; i0 < rows_i; i0 += kMaxBlockRows) {
    const int64_t n = rows_i - i0 < kMaxBlockRows ? rows_i - i0 : kMaxBlockRows;
    RowRange outer;
    if (!outer_rows_of_block(ranges, i0, rows_o, outer)) continue;
    for (int64_t o0 = outer.begin; o0 < outer.end; o0 += kOuterPiece) {
      const int64_t rows = outer.end - o0 < kOuterPiece ? outer.end - o0 : kOuterPiece;
      for (int64_t p = 0; 2 * p < n; ++p) {
        const float* low = w + (i0 + 2 * p) * ldw + o0;
        rounded_pairs(low, 2 * p + 1 < n ? low + ldw : nullptr, rows, w_pairs + p * kOuterPiece);
      }
      float* acc_rows = acc + o0 * cols;
      const float* b_rows = b + i0 * cols;
      switch ((n + 1) / 2) {
        case 1: accumulate_pairs_rows<1>(acc_rows, rows, cols, w_pairs, kOuterPiece, b_rows, n); break;
        case 2: accumulate_pairs_rows<2>(acc_rows, rows, cols, w_pairs, kOuterPiece, b_rows, n); break;
        case 3: accumulate_pairs_rows<3>(acc_rows, rows, cols, w_pairs, kOuterPiece, b_rows, n); break;
        default: accumulate_pairs_rows<4>(acc_rows, rows, cols, w_pairs, kOuterPiece, b_rows, n); break;
      }
    }
  }
}

}  // namespace spattn::schedules::flash_kernels::SPATTN_KERNEL_NAMESPACE
