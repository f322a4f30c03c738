// The small-cache kernels' entry points per instruction set (small_cache_kernels.hpp chooses among
// them with flash_kernels::kernel_isa()). They are compiled in the flash kernels' translation unit
// of each set (flash_kernels_isa.hpp lists them), which already carries that set's target.
#pragma once

#include "cpu/kernels/flash_kernels_isa.hpp"
#include "cpu/kernels/small_cache_kernels.hpp"

namespace spattn::schedules::small_cache_kernels::isa {

struct Table {
  int lanes;
  void (*multiply_add)(const Product&);
  void (*exp_shifted_rows)(float*, int64_t, int64_t, int64_t, const float*);
  void (*update_row_statistics)(const float*, int64_t, int64_t, int64_t, float*, float*);
  float (*dot)(const float*, const float*, int64_t);
  void (*axpy)(float, const float*, float*, int64_t);
};

extern const Table kPortable;
#if defined(SPATTN_KERNELS_X86)
extern const Table kAvx2;
extern const Table kAvx512;
#endif

}  // namespace spattn::schedules::small_cache_kernels::isa
