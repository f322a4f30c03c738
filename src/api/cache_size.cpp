// The default fast-memory size: the per-core L1 data cache, in fp32 words.
#include <spattn/attention.hpp>

#include <unistd.h>

#include <fstream>
#include <string>

namespace spattn {

namespace {

// "48K" -> 49152; 0 when unreadable.
int64_t read_sysfs_cache_bytes() {
  for (int index = 0; index < 4; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (level != 1 || type == "Instruction" || size.empty()) continue;
    int64_t bytes = 0;
    size_t pos = 0;
    while (pos < size.size() && size[pos] >= '0' && size[pos] <= '9') bytes = bytes * 10 + (size[pos++] - '0');
    if (pos < size.size() && (size[pos] == 'K' || size[pos] == 'k')) bytes *= 1024;
    if (pos < size.size() && (size[pos] == 'M' || size[pos] == 'm')) bytes *= 1024 * 1024;
    return bytes;
  }
  return 0;
}

}  // namespace

int64_t default_cache_words() {
  static const int64_t words = [] {
    int64_t bytes = 0;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    bytes = static_cast<int64_t>(sysconf(_SC_LEVEL1_DCACHE_SIZE));
#endif
    if (bytes <= 0) bytes = read_sysfs_cache_bytes();
    if (bytes <= 0) bytes = 48 * 1024;
    return bytes / static_cast<int64_t>(sizeof(float));
  }();
  return words;
}

}  // namespace spattn
