// The CUDA API in a build without CUDA: every call that needs a device throws, so that code
// written against include/spattn/cuda.hpp links and fails clearly at run time.
#ifndef SPATTN_HAVE_CUDA

#include <spattn/cuda.hpp>

#include "cuda/api_instances.hpp"
#include "device/device_lists.hpp"

namespace spattn::cuda {
namespace {
[[noreturn]] void unavailable(const char* what) {
  throw RuntimeError(std::string("spattn::cuda::") + what +
                     ": spattn was built without CUDA (configure with the CUDA toolkit and "
                     "SPATTN_CUDA=AUTO or ON)");
}
}  // namespace

bool device_available() { return false; }
std::string device_status() { return "built without CUDA"; }
int64_t shared_memory_per_block() { unavailable("shared_memory_per_block"); }
void release_device_caches() {}

template <typename T>
DeviceRun attention_forward(TensorView<const T>, TensorView<const T>, TensorView<const T>,
                            TensorView<T>, TensorView<float>, const HeadMasks&,
                            const Options&) {
  unavailable("attention_forward");
}
template <typename T>
DeviceRun attention_backward(TensorView<const T>, TensorView<const T>, TensorView<const T>,
                             TensorView<const T>, TensorView<const float>, TensorView<const T>,
                             TensorView<T>, TensorView<T>, TensorView<T>, const HeadMasks&,
                             const Options&) {
  unavailable("attention_backward");
}

SPATTN_CUDA_API_INSTANCES

namespace detail {
void* device_allocate(std::size_t) { unavailable("DeviceMemory"); }
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, std::size_t) { unavailable("DeviceMemory::upload"); }
void copy_to_host(void*, const void*, std::size_t) { unavailable("DeviceMemory::download"); }
void device_fill_zero(void*, std::size_t) { unavailable("DeviceMemory::zero"); }
void device_synchronize() { unavailable("device_synchronize"); }
}  // namespace detail

}  // namespace spattn::cuda

namespace spattn::device {
FlatTileLists device_flash_lists(const std::vector<Mask>&, const FlashTiles&, Pass, bool,
                                 ListsBuilder) {
  cuda::unavailable("device_flash_lists");
}
}  // namespace spattn::device

#endif  // SPATTN_HAVE_CUDA
