// DeviceRun (spattn/device_run.hpp) printed.
#include <spattn/device_run.hpp>

#include <sstream>

namespace spattn::cuda {

const char* cuda_algorithm_name(CudaAlgorithm algorithm) {
  return algorithm == CudaAlgorithm::flash ? "flash" : "small_cache";
}

std::string DeviceRun::to_string() const {
  std::ostringstream out;
  out << "cuda " << cuda_algorithm_name(algorithm) << " " << pass_name(pass);
  if (algorithm == CudaAlgorithm::flash) {
    out << (tensor_cores ? " (tensor cores)" : "") << ": M = " << cache_words << " words, " << shared_memory_bytes
        << " bytes shared memory per block, block_q " << block_q << ", block_k " << block_k;
    if (pass == Pass::backward) out << ", dkdv_block_q " << dkdv_block_q << ", dkdv_block_k " << dkdv_block_k;
  }
  return out.str();
}

}  // namespace spattn::cuda
