// The emulation's stand-in for nvcuda::wmma (src/cuda/mma_kernels.cuh includes it when
// SPATTN_FLASH_EMULATION is set): a fragment holds its whole 16 x 16 tile, so the emulation's one
// thread per block does a warp's work alone. Loads honour the layout and leading dimension as
// wmma's do, products accumulate in fp32 in index order, and 16-bit operands are the project's
// half_t / bfloat16_t, held as the fp32 values they represent (converted once, at the load).
#pragma once

#include <spattn/cuda.hpp>

#include <type_traits>

namespace spattn_emulation::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

inline float operand_value(float x) { return x; }
inline float operand_value(spattn::cuda::half_t x) { return spattn::cuda::to_float(x); }
inline float operand_value(spattn::cuda::bfloat16_t x) { return spattn::cuda::to_float(x); }

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = rows * cols;
  float x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  for (float& e : f.x) e = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm) {
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r) {
    for (int c = 0; c < F::cols; ++c) {
      f.x[r * F::cols + c] = operand_value(std::is_same_v<Layout, col_major> ? p[c * ldm + r] : p[r * ldm + c]);
    }
  }
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) f.x[r * N + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
  }
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
  for (int r = 0; r < M; ++r) {
    for (int c = 0; c < N; ++c) (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
  }
}

template <int M, int N, int K, typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, T, LA>& a,
              const fragment<matrix_b, M, N, K, T, LB>& b, const fragment<accumulator, M, N, K, float>& c) {
  fragment<accumulator, M, N, K, float> result;
  for (int r = 0; r < M; ++r) {
    for (int col = 0; col < N; ++col) {
      float sum = c.x[r * N + col];
      for (int k = 0; k < K; ++k) sum += a.x[r * K + k] * b.x[k * N + col];
      result.x[r * N + col] = sum;
    }
  }
  d = result;
}

}  // namespace spattn_emulation::wmma
