// The default fast-memory size M: four times the per-core L1 data cache, at most half the
// per-core L2, in fp32 words (49152 words on a core with a 48 KiB L1d and a 2 MiB L2).
//
// Why not the L1d itself: the model's fast memory holds a worker's tiles, and the tiles the L1d
// implies (12288 words) are too thin for the kernels at d = 128 (flash inner tiles of 1 or 2 rows,
// small_cache score tiles one column wide), so every multiply-add goes through memory. Why not
// more: larger tiles cover more pairs outside a band, a document or a block pattern, and their
// working set leaves the core's L2. 4 x L1d was the fastest of 12288 ... 262144 words across
// `spattn_bench`'s grid (geometric mean and worst case; docs/results.md section 4); the L2 cap
// keeps the tiles in a core's own caches where the L2 is small.
//
// Sources: sysconf, else /sys/devices/system/cpu/cpu0/cache (a cache's size divided by the CPUs
// sharing it); 49152 words when neither says anything about the L1d.
#include <spattn/attention.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace spattn {

namespace {

constexpr int64_t kL1Multiple = 4;         // M = kL1Multiple x L1d ...
constexpr int64_t kL2Share = 2;            // ... at most L2 / kL2Share
constexpr int64_t kFallbackWords = 49152;  // the L1d unknown

// "48K" -> 49152, "2048K" -> 2097152, "2M" -> 2097152; 0 when unreadable.
int64_t parse_size(const std::string& text) {
  int64_t bytes = 0;
  size_t pos = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    bytes = bytes * 10 + (text[pos++] - '0');
  }
  if (pos < text.size() && (text[pos] == 'K' || text[pos] == 'k')) bytes *= 1024;
  if (pos < text.size() && (text[pos] == 'M' || text[pos] == 'm')) bytes *= 1024 * 1024;
  return bytes;
}

// The number of CPUs in a list such as "0-1,4" (at least 1).
int64_t count_cpus(const std::string& list) {
  int64_t count = 0;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string range = list.substr(pos, end - pos);
    const size_t dash = range.find('-');
    if (dash == std::string::npos) {
      count += range.empty() ? 0 : 1;
    } else {
      count += std::stoll(range.substr(dash + 1)) - std::stoll(range.substr(0, dash)) + 1;
    }
    pos = end + 1;
  }
  return count > 0 ? count : 1;
}

// CPU 0's data or unified cache of `level`, in bytes per CPU sharing it; 0 when unreadable.
int64_t sysfs_cache_bytes_per_cpu(int wanted_level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) continue;
    if (level != wanted_level || type == "Instruction") continue;
    std::ifstream shared_file(dir + "shared_cpu_list");
    std::string shared;
    const int64_t sharing = (shared_file >> shared) ? count_cpus(shared) : 1;
    return parse_size(size) / sharing;
  }
  return 0;
}

// A cache size in bytes: sysconf's figure, else the /sys one per sharing CPU; 0 when unknown.
int64_t cache_bytes(int sysconf_name, int level) {
  if (sysconf_name >= 0) {
    const long value = sysconf(sysconf_name);
    if (value > 0) return static_cast<int64_t>(value);
  }
  try {
    return sysfs_cache_bytes_per_cpu(level);
  } catch (...) {  // a malformed shared_cpu_list
    return 0;
  }
}

}  // namespace

int64_t default_cache_words() {
  static const int64_t words = [] {
#ifdef _SC_LEVEL1_DCACHE_SIZE
    const int64_t l1 = cache_bytes(_SC_LEVEL1_DCACHE_SIZE, 1);
#else
    const int64_t l1 = cache_bytes(-1, 1);
#endif
#ifdef _SC_LEVEL2_CACHE_SIZE
    const int64_t l2 = cache_bytes(_SC_LEVEL2_CACHE_SIZE, 2);
#else
    const int64_t l2 = cache_bytes(-1, 2);
#endif
    constexpr auto word = static_cast<int64_t>(sizeof(float));
    if (l1 <= 0) return kFallbackWords;
    int64_t bytes = kL1Multiple * l1;
    if (l2 > 0) bytes = std::min(bytes, l2 / kL2Share);
    return std::max<int64_t>(bytes / word, 1);
  }();
  return words;
}

}  // namespace spattn
