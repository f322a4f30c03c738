#include "atomic_file.hpp"

#include <sparse_formats/error.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>

namespace sparse_formats::detail {
namespace {

// Same directory as the target, so the final rename never crosses file systems.
std::string temporary_path_for(const std::string& path) {
  static std::atomic<unsigned long long> counter{0};
  std::random_device entropy;
  const unsigned long long tag = (static_cast<unsigned long long>(entropy()) << 20) ^ counter++;
  return path + ".tmp-" + std::to_string(tag);
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
  const std::string temporary = temporary_path_for(path);
  try {
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      if (!out) fail(path, ": cannot create temporary file '", temporary, "' for writing");
      write(out);
      out.flush();
      if (!out) fail(path, ": write failed (disk full or I/O error)");
      out.close();
      if (out.fail()) fail(path, ": closing the written file failed");
    }
    if (std::rename(temporary.c_str(), path.c_str()) != 0) {
      fail(path, ": cannot rename temporary file '", temporary, "' over it");
    }
  } catch (...) {
    std::remove(temporary.c_str());
    throw;
  }
}

}  // namespace sparse_formats::detail
