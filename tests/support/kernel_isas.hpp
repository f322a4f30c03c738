// The flash kernels' instruction sets in the tests that run each one (flash_kernels_test.cpp,
// flash_kernels_partial_test.cpp): those this CPU supports, and a guard that puts back the set in
// use when a test ends.
#pragma once

#include "cpu/kernels/flash_kernels.hpp"

#include <vector>

namespace spattn_test {

inline std::vector<spattn::schedules::flash_kernels::KernelIsa> supported_isas() {
  using spattn::schedules::flash_kernels::KernelIsa;
  std::vector<KernelIsa> isas;
  for (KernelIsa isa : {KernelIsa::portable, KernelIsa::avx2, KernelIsa::avx512, KernelIsa::avx512_bf16}) {
    if (spattn::schedules::flash_kernels::kernel_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

class IsaGuard {
 public:
  IsaGuard() : saved_(spattn::schedules::flash_kernels::kernel_isa()) {}
  ~IsaGuard() { spattn::schedules::flash_kernels::set_kernel_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  spattn::schedules::flash_kernels::KernelIsa saved_;
};

}  // namespace spattn_test
