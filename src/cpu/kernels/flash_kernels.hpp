// The arithmetic of the flash schedule on tiles already in fast memory: one call per (outer tile,
// inner tile) pair of a loop nest. The schedules (flash_forward.cpp, flash_backward.cpp) move the
// data; these only compute, on contiguous fast buffers, with no allocation.
//
// Layout (why: the innermost loops run over contiguous memory, vectorized over the outer tile's
// rows, and every accumulation runs in a fixed order, so results do not depend on the vector
// width, on blocking or on threads):
//   - the outer tile's operands that meet the inner tile in a score product are held transposed,
//     (head_dim, rows_outer): Q^T in the forward and the dQ pass (and dO^T there), K^T, V^T in the
//     dK/dV pass;
//   - the inner tile is row-major (rows_inner, head_dim);
//   - the score tile is (rows_inner, rows_outer), row-major: s[i][o];
//   - accumulators (O, dQ, dK, dV) are row-major (rows_outer, head_dim).
// A partial tile's bit set (flash_mask.hpp) holds element (o, i) at bit o * bit_stride + i
// (bit_stride = the inner tile size the mask was built for).
//
// Each step exists in a few instruction-set variants (portable C++ with GCC/Clang vector types,
// AVX2+FMA, AVX-512: flash_kernels_isa.hpp), chosen once at run time for this CPU (kernel_isa()).
// Within one variant every result is a fixed function of the tile shapes, so bit-identical for any
// thread count and across runs; between variants the last bits may differ (vector widths change
// the register blocking and so the partial sums of a score product; the portable variant has no
// fused multiply-add).
#pragma once

#include <cstdint>

namespace spattn::schedules::flash_kernels {

// The forward's inner step: S = scale K Q^T, masked entries -inf, then FlashAttention's online
// softmax per query row o (m' = max(m, max_i S), P = exp(S - m'), l' = l e^{m - m'} + sum_i P,
// acc' = acc e^{m - m'} + P^T V). A row whose scores are all -inf so far is left unchanged.
struct ForwardTile {
  const float* q_t = nullptr;  // (d, rows_q), the query tile transposed
  const float* k = nullptr;    // (rows_k, d)
  const float* v = nullptr;    // (rows_k, e)
  int64_t rows_q = 0, rows_k = 0, d = 0, e = 0;
  float scale = 1.0f;
  const uint64_t* bits = nullptr;  // partial tile; nullptr when full
  int64_t bit_stride = 0;          // block_k
  float* s = nullptr;              // (rows_k, rows_q) scratch: S, then P
  float* row_max = nullptr;        // (rows_q)
  float* row_sum = nullptr;        // (rows_q)
  float* acc = nullptr;            // (rows_q, e)
};

// The dQ pass's inner step: P = exp(scale K Q^T - LSE) (0 where masked or LSE = -inf),
// dS = P ∘ (V dO^T - D), dQ += dS^T K (the scale is applied by the caller, once).
struct DqTile {
  const float* q_t = nullptr;    // (d, rows_q)
  const float* do_t = nullptr;   // (e, rows_q)
  const float* lse = nullptr;    // (rows_q)
  const float* delta = nullptr;  // (rows_q)
  const float* k = nullptr;      // (rows_k, d)
  const float* v = nullptr;      // (rows_k, e)
  int64_t rows_q = 0, rows_k = 0, d = 0, e = 0;
  float scale = 1.0f;
  const uint64_t* bits = nullptr;
  int64_t bit_stride = 0;  // block_k
  float* s = nullptr;      // (rows_k, rows_q) scratch: P, then dS
  float* dq = nullptr;     // (rows_q, d)
};

// The dK/dV pass's inner step: P = exp(scale Q K^T - LSE), dV += P^T dO, dS = P ∘ (dO V^T - D),
// dK += dS^T Q (scale applied by the caller).
struct DkdvTile {
  const float* k_t = nullptr;    // (d, rows_k)
  const float* v_t = nullptr;    // (e, rows_k)
  const float* q = nullptr;      // (rows_q, d)
  const float* d_o = nullptr;    // (rows_q, e)
  const float* lse = nullptr;    // (rows_q)
  const float* delta = nullptr;  // (rows_q)
  int64_t rows_k = 0, rows_q = 0, d = 0, e = 0;
  float scale = 1.0f;
  const uint64_t* bits = nullptr;
  int64_t bit_stride = 0;  // dkdv_block_q
  float* s = nullptr;      // (rows_q, rows_k) scratch: P, then dS
  float* dk = nullptr;     // (rows_k, d)
  float* dv = nullptr;     // (rows_k, e)
};

enum class KernelIsa : uint8_t { portable, avx2, avx512 };
const char* kernel_isa_name(KernelIsa isa);  // "portable", "avx2", "avx512"

// Whether this CPU (and build) can run `isa`.
bool kernel_isa_supported(KernelIsa isa);
// The set in use: the one the environment variable SPATTN_KERNELS names (portable, avx2 or
// avx512; InvalidArgument when unknown or unsupported here), else the widest supported one,
// unless set_kernel_isa chose another. Decided on first use; the schedules ask before they start.
KernelIsa kernel_isa();
// For tests and measurements: use `isa` from now on (process-wide). Throws InvalidArgument when
// it is not supported here.
void set_kernel_isa(KernelIsa isa);

void forward_tile(const ForwardTile& tile);
void dq_tile(const DqTile& tile);
void dkdv_tile(const DkdvTile& tile);

}  // namespace spattn::schedules::flash_kernels
