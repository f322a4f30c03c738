// Launchers of the tensor-core flash kernels (mma_kernels.cuh): the padded head dim picks the
// kernel instance; 16-bit element types only.
#include "cuda/launch.cuh"
#include "cuda/mma_kernels.cuh"

#include <spattn/error.hpp>

#include <string>

namespace spattn::cuda::detail {

namespace {

// kernel_of<dim>() for dim in {32, 64, 128}, as a function pointer.
template <template <int> class Kernel>
auto kernel_for(int dim) {
  switch (dim) {
    case 32:
      return Kernel<32>::get();
    case 64:
      return Kernel<64>::get();
    case 128:
      return Kernel<128>::get();
    default:
      throw InvalidArgument("cuda mma kernels: padded head dim " + std::to_string(dim) + " is not 32, 64 or 128");
  }
}

template <typename T>
struct Forward {
  template <int Dim>
  struct At {
    static auto get() { return &mma_device::mma_forward_kernel<T, Dim>; }
  };
};
template <typename T>
struct Dkdv {
  template <int Dim>
  struct At {
    static auto get() { return &mma_device::mma_dkdv_kernel<T, Dim>; }
  };
};
template <typename T>
struct Dq {
  template <int Dim>
  struct At {
    static auto get() { return &mma_device::mma_dq_kernel<T, Dim>; }
  };
};

}  // namespace

template <typename T>
void launch_mma_forward(const ForwardParams<T>& p, int dim, cudaStream_t stream) {
  launch_tiles(kernel_for<Forward<T>::template At>(dim), p, p.dims.seqlen_q, kMmaTile, p.dims.batch * p.dims.heads,
               kMmaThreads, 4 * p.layout.words, stream, "launch of flash mma_forward_kernel");
}

template <typename T>
void launch_mma_dkdv(const DkdvParams<T>& p, int dim, cudaStream_t stream) {
  launch_tiles(kernel_for<Dkdv<T>::template At>(dim), p, p.dims.seqlen_k, kMmaTile, p.dims.batch * p.dims.kv_heads,
               kDkdvThreads, 4 * p.layout.words, stream, "launch of flash mma_dkdv_kernel");
}

template <typename T>
void launch_mma_dq(const DqParams<T>& p, int dim, cudaStream_t stream) {
  launch_tiles(kernel_for<Dq<T>::template At>(dim), p, p.dims.seqlen_q, kMmaTile, p.dims.batch * p.dims.heads,
               kMmaThreads, 4 * p.layout.words, stream, "launch of flash mma_dq_kernel");
}

#define SPATTN_MMA_LAUNCHERS(T)                                                        \
  template void launch_mma_forward<T>(const ForwardParams<T>&, int, cudaStream_t); \
  template void launch_mma_dkdv<T>(const DkdvParams<T>&, int, cudaStream_t);       \
  template void launch_mma_dq<T>(const DqParams<T>&, int, cudaStream_t);
SPATTN_MMA_LAUNCHERS(half_t)
SPATTN_MMA_LAUNCHERS(bfloat16_t)
#undef SPATTN_MMA_LAUNCHERS

}  // namespace spattn::cuda::detail
