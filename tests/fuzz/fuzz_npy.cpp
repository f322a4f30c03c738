// Fuzz target: the .npy reader on any bytes, as float64 and as float32. It must read or refuse
// (FormatError) in memory bounded by the input; what it reads holds exactly the declared shape's
// element count.
#include <sparse_formats/error.hpp>
#include <sparse_formats/npy.hpp>

#include "fuzz_support.hpp"

#include <sstream>
#include <string>

namespace {

template <typename T>
void read_as(const std::string& bytes) {
  std::istringstream in(bytes);
  try {
    const auto array = sparse_formats::read_npy<T>(in, "<fuzz>");
    int64_t count = 1;
    for (const int64_t extent : array.shape) {
      if (extent < 0) spattn_fuzz::finding("negative extent " + std::to_string(extent));
      count *= extent;
    }
    if (static_cast<int64_t>(array.data.size()) != count) {
      spattn_fuzz::finding("read " + std::to_string(array.data.size()) + " values for " + std::to_string(count));
    }
  } catch (const sparse_formats::FormatError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  read_as<double>(bytes);
  read_as<float>(bytes);
  return 0;
}
