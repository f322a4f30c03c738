// The run-time choice of the small-cache kernels: the instruction set the flash kernels use
// (flash_kernels::kernel_isa(), which SPATTN_KERNELS and set_kernel_isa control), so that one
// process never mixes the two.
#include "cpu/kernels/small_cache_kernels.hpp"

#include "cpu/kernels/flash_kernels.hpp"
#include "cpu/kernels/small_cache_kernels_isa.hpp"

namespace spattn::schedules::small_cache_kernels {

namespace {

const isa::Table& table() {
  switch (flash_kernels::kernel_isa()) {
#if defined(SPATTN_KERNELS_X86)
    case flash_kernels::KernelIsa::avx512:
    case flash_kernels::KernelIsa::avx512_bf16: return isa::kAvx512;
    case flash_kernels::KernelIsa::avx2: return isa::kAvx2;
#endif
    default: return isa::kPortable;
  }
}

}  // namespace

void multiply_add(const Product& product) { table().multiply_add(product); }

bool prefers_transposed_b(int64_t cols) { return cols < table().lanes; }

void exp_shifted_rows(float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift) {
  table().exp_shifted_rows(x, rows, cols, ld, shift);
}

void update_row_statistics(const float* s, int64_t rows, int64_t cols, int64_t ld, float* row_max,
                           float* row_sum) {
  table().update_row_statistics(s, rows, cols, ld, row_max, row_sum);
}

float dot(const float* a, const float* b, int64_t n) { return table().dot(a, b, n); }

void axpy(float alpha, const float* x, float* y, int64_t n) { table().axpy(alpha, x, y, n); }

}  // namespace spattn::schedules::small_cache_kernels
