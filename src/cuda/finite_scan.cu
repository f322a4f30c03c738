// check_finite_on_device (finite_scan.hpp): the flag from the device scan, and on a refusal the
// tensor's span copied back to name the element exactly as the CPU check does.
#include "cuda/finite_scan.hpp"

#include "cuda/device_buffer.hpp"
#include "reference/finite_values.hpp"

#include <spattn/cuda.hpp>
#include <spattn/error.hpp>

#include <cstdint>
#include <vector>

namespace spattn::cuda::detail {
namespace {

// Elements from the view's first to its last (strides are non-negative: the shape checks ran).
template <typename T>
int64_t span_of(const TensorView<const T>& t) {
  int64_t span = 1;
  for (int i = 0; i < 4; ++i) span += (t.shape[static_cast<size_t>(i)] - 1) * t.stride[static_cast<size_t>(i)];
  return span;
}

}  // namespace

template <typename T>
void check_finite_on_device(const char* where, const char* name, const TensorView<const T>& t,
                            bool minus_infinity_allowed, cudaStream_t stream) {
  if (t.data == nullptr || t.numel() == 0) return;
  DeviceBuffer<int> found(std::vector<int>{0});
  finite_device::FiniteScanParams<T> p;
  p.tensor = strided(t);
  for (int i = 0; i < 4; ++i) p.shape[i] = t.shape[static_cast<size_t>(i)];
  p.minus_infinity_allowed = minus_infinity_allowed;
  p.found = found.data();
  launch_finite_scan(p, stream);
  SPATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
  int flag = 0;
  SPATTN_CUDA_CHECK(cudaMemcpy(&flag, found.data(), sizeof(int), cudaMemcpyDeviceToHost));
  if (flag == 0) return;
  // Refused: the span back to the host as floats, checked there for the element and the message.
  const int64_t span = span_of(t);
  std::vector<T> raw(static_cast<size_t>(span));
  SPATTN_CUDA_CHECK(cudaMemcpy(raw.data(), t.data, raw.size() * sizeof(T), cudaMemcpyDeviceToHost));
  std::vector<float> values(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) values[i] = to_float(raw[i]);
  const TensorView<const float> host{values.data(), t.shape, t.stride};
  reference::check_finite(where, name, host, minus_infinity_allowed);
  fail(where, ": ", name, " holds a value that is not finite (the device scan found one the host copy does not show)");
}

template void check_finite_on_device<float>(const char*, const char*, const TensorView<const float>&, bool, cudaStream_t);
template void check_finite_on_device<half_t>(const char*, const char*, const TensorView<const half_t>&, bool, cudaStream_t);
template void check_finite_on_device<bfloat16_t>(const char*, const char*, const TensorView<const bfloat16_t>&, bool,
                                                 cudaStream_t);

}  // namespace spattn::cuda::detail
