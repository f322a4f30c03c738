// Checking every CUDA runtime and cuSPARSE call: a failure throws spattn::RuntimeError naming the
// call as written, file:line and the library's error string.
#pragma once

#include <spattn/error.hpp>

#include <cuda_runtime.h>
#include <cusparse.h>

#include <string>

namespace spattn::cuda::detail {

[[noreturn]] inline void throw_cuda_error(const char* call, const char* file, int line,
                                          const std::string& error) {
  throw RuntimeError(std::string("CUDA error: ") + call + " at " + file + ":" + std::to_string(line) +
                     ": " + error);
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw_cuda_error(call, file, line, std::string(cudaGetErrorName(status)) + " (" +
                                           cudaGetErrorString(status) + ")");
  }
}

inline void check_cusparse(cusparseStatus_t status, const char* call, const char* file, int line) {
  if (status != CUSPARSE_STATUS_SUCCESS) {
    throw_cuda_error(call, file, line, std::string("cuSPARSE ") + cusparseGetErrorName(status) + " (" +
                                           cusparseGetErrorString(status) + ")");
  }
}

}  // namespace spattn::cuda::detail

#define SPATTN_CUDA_CHECK(call) ::spattn::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define SPATTN_CUSPARSE_CHECK(call) \
  ::spattn::cuda::detail::check_cusparse((call), #call, __FILE__, __LINE__)
// After a kernel launch: a bad configuration is reported by cudaGetLastError.
#define SPATTN_CUDA_CHECK_LAUNCH(name) \
  ::spattn::cuda::detail::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
