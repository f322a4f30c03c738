// The element types of include/spattn/cuda.hpp's templates, instantiated by whichever translation
// unit implements them (src/cuda/api.cu with CUDA, src/cuda/unavailable.cpp without).
#pragma once

#include <spattn/cuda.hpp>

#define SPATTN_CUDA_API_INSTANCE(T)                                                               \
  template DeviceRun attention_forward<T>(TensorView<const T>, TensorView<const T>,              \
                                          TensorView<const T>, TensorView<T>, TensorView<float>, \
                                          const HeadMasks&, const Options&);                     \
  template DeviceRun attention_backward<T>(                                                      \
      TensorView<const T>, TensorView<const T>, TensorView<const T>, TensorView<const T>,        \
      TensorView<const float>, TensorView<const T>, TensorView<T>, TensorView<T>, TensorView<T>, \
      const HeadMasks&, const Options&);

// Inside namespace spattn::cuda: every supported element type.
#define SPATTN_CUDA_API_INSTANCES       \
  SPATTN_CUDA_API_INSTANCE(float)       \
  SPATTN_CUDA_API_INSTANCE(half_t)      \
  SPATTN_CUDA_API_INSTANCE(bfloat16_t)
