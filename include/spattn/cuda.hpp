// The CUDA backend: attention forward and backward on device tensors (docs/cuda.md).
//
//   spattn::cuda::DeviceMemory<float> q(n * d), k(n * d), ...;   // or your own device pointers
//   auto mask = spattn::Mask::from_spec("sliding_window:w=256", n, n);
//   spattn::cuda::Options options;                                 // block-sparse flash kernels
//   spattn::cuda::attention_forward<float>(qv, kv, vv, ov, lsev, mask, options);  // {}: no mask
//
// Views are the CPU API's TensorView types over DEVICE pointers, (batch, heads, seqlen, head_dim),
// any strides. Element types: float, half_t and bfloat16_t (the bit layouts of CUDA's __half and
// __nv_bfloat16: reinterpret_cast your pointers); every sum is accumulated in fp32 and LSE is fp32.
// k and v may have fewer heads than q (grouped-query attention: kv_heads divides heads; q head h
// uses kv head h / (heads / kv_heads)). The mask is shared by all heads, or one per q head.
//
// This header compiles without CUDA; a build without CUDA (SPATTN_HAVE_CUDA unset) throws
// RuntimeError("... built without CUDA ...") from every call except device_available() (false) and
// device_status() (the reason). Validation happens on the host before anything is launched;
// messages name the argument and the values. Device errors throw RuntimeError naming the CUDA or
// cuSPARSE call, file:line and the error string.
#pragma once

#include <spattn/device_run.hpp>
#include <spattn/elements.hpp>
#include <spattn/error.hpp>
#include <spattn/mask.hpp>
#include <spattn/types.hpp>
#include <spattn/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace spattn::cuda {

// The 16-bit element types and their conversions (spattn/elements.hpp), as this API names them.
using spattn::bfloat16_t;
using spattn::element_type_name;
using spattn::element_type_of;
using spattn::ElementType;
using spattn::from_float;
using spattn::half_t;
using spattn::to_bfloat16;
using spattn::to_float;
using spattn::to_half;

struct Options {
  CudaAlgorithm algorithm = CudaAlgorithm::flash;
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
  void* stream = nullptr;       // a cudaStream_t; nullptr = the default stream
  // Shared memory per block the flash kernels may use, in bytes; 0 = the device's opt-in maximum
  // (cudaDevAttrMaxSharedMemoryPerBlockOptin). The planner gets M = this / 4 words (minus the
  // kernels' own scratch, docs/cuda.md).
  int64_t shared_memory_bytes = 0;
  // fp16 / bf16 inputs with head dims up to 128: the tensor-core flash kernels (64 x 64 tiles, wmma
  // products, fp32 accumulation) when their shared memory fits the budget; false: always the fp32
  // kernels with the planner's tiles (docs/cuda.md).
  bool tensor_cores = true;
  // Waits for the stream before returning (so that errors of the kernels surface here).
  bool synchronize = true;
  // Refuses NaN and infinity in the inputs before any kernel writes an output, naming the tensor
  // and the element, as the CPU entry points do (docs/api.md, "Non-finite values"): one read of
  // the inputs on the device and a wait for the stream. false skips it (a NaN input then comes out
  // as a fully masked row: o = 0, lse = -inf).
  bool check_finite = true;
};

// True when the CUDA runtime sees at least one device.
bool device_available();
// "" when a device is available; otherwise why not ("no CUDA device: cudaGetDeviceCount returned
// ..." or "built without CUDA").
std::string device_status();
// The current device's opt-in shared memory per block in bytes; throws RuntimeError without one.
int64_t shared_memory_per_block();

// ---- attention -------------------------------------------------------------------------------
// o: (batch, heads, seqlen_q, head_dim_v) of T; lse: (batch, heads, seqlen_q, 1) fp32; -inf (and
// a zero row of o) where a query attends nothing. `masks`: the CPU entry points' mask argument
// (HeadMasks, spattn/mask.hpp): `{}` (every pair attended), one Mask shared by all heads, or a
// std::vector<Mask> with one per query head, each seqlen_q x seqlen_k.
template <typename T>
DeviceRun attention_forward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v,
                            TensorView<T> o, TensorView<float> lse, const HeadMasks& masks = {},
                            const Options& options = {});

// dq, dk, dv take the shapes of q, k, v (dk, dv: kv_heads heads, summed over each group).
template <typename T>
DeviceRun attention_backward(TensorView<const T> q, TensorView<const T> k, TensorView<const T> v,
                             TensorView<const T> o, TensorView<const float> lse,
                             TensorView<const T> d_o, TensorView<T> dq, TensorView<T> dk,
                             TensorView<T> dv, const HeadMasks& masks = {}, const Options& options = {});

// The plan of one call, without running it: which kernels, tiles and shared memory the flash path
// would use (for fp16 / bf16 the tensor-core kernels when they fit, else the planner's tiles for
// the budget), or that small_cache would run. The budget is options.shared_memory_bytes, or the
// current device's when that is 0 (then a device must exist: RuntimeError says why not). Needs no
// GPU with an explicit budget (e.g. 232448, an H100/H200's). Throws InvalidArgument naming the
// argument for negative extents, a zero head dim, a mask of another shape, or a budget below the
// smallest tiles.
DeviceRun plan_call(Pass pass, ElementType type, int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim,
                    int64_t head_dim_v, const Mask& mask, const Options& options = {});

// Drops the device copies of mask structures kept between calls (docs/cuda.md, "Mask cache").
void release_device_caches();

// ---- device memory (for callers without CUDA headers: tests, benchmarks) --------------------
namespace detail {
void* device_allocate(std::size_t bytes);  // throws RuntimeError (naming the size) on failure
void device_free(void* pointer) noexcept;
void copy_to_device(void* device, const void* host, std::size_t bytes);
void copy_to_host(void* host, const void* device, std::size_t bytes);
void device_fill_zero(void* device, std::size_t bytes);
void device_synchronize();
}  // namespace detail

// An owning device array of `size` elements (uninitialized).
template <typename T>
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t size)
      : data_(static_cast<T*>(size ? detail::device_allocate(size * sizeof(T)) : nullptr)),
        size_(size) {}
  explicit DeviceMemory(const std::vector<T>& host) : DeviceMemory(host.size()) { upload(host); }
  ~DeviceMemory() { detail::device_free(data_); }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  DeviceMemory(DeviceMemory&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  void upload(const std::vector<T>& host) {
    if (host.size() != size_) fail("DeviceMemory::upload: ", host.size(), " elements, expected ", size_);
    if (size_) detail::copy_to_device(data_, host.data(), size_ * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> host(size_);
    if (size_) detail::copy_to_host(host.data(), data_, size_ * sizeof(T));
    return host;
  }
  void zero() {
    if (size_) detail::device_fill_zero(data_, size_ * sizeof(T));
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace spattn::cuda
