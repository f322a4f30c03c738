// The launch of the device scan for non-finite inputs (finite_scan.hpp): enough blocks of 256
// threads to cover the tensor once, capped (the kernel strides over what is left).
#include "cuda/check.hpp"
#include "cuda/finite_scan.hpp"

#include <algorithm>

namespace spattn::cuda::detail {

template <typename T>
void launch_finite_scan(const finite_device::FiniteScanParams<T>& p, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t total = p.shape[0] * p.shape[1] * p.shape[2] * p.shape[3];
  if (total == 0) return;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 4096);
  finite_device::finite_scan_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p);
  check_cuda(cudaGetLastError(), "finite_scan_kernel", __FILE__, __LINE__);
}

template void launch_finite_scan<float>(const finite_device::FiniteScanParams<float>&, cudaStream_t);
template void launch_finite_scan<half_t>(const finite_device::FiniteScanParams<half_t>&, cudaStream_t);
template void launch_finite_scan<bfloat16_t>(const finite_device::FiniteScanParams<bfloat16_t>&, cudaStream_t);

}  // namespace spattn::cuda::detail
