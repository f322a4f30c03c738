// spattn_thrust_lists_bench [N] [REPEATS] [SPEC...]: wall time to build both directions of a
// backward FlashMask's tile lists (64 x 64 tiles) for an N x N mask on the host, by
// build_flash_mask and by the Thrust algorithm the device runs (src/device/thrust, CPP device
// system: sequential), the median of REPEATS runs each; the two results are checked equal.
// Defaults: N = 131072, 5 repeats, causal and sliding_window:w=256.
#include "device/thrust/flash_lists.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <spattn/mask.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using spattn::device::build_tile_lists_thrust_host;
using spattn::device::ListDirection;
using spattn::schedules::FlashMask;
using spattn::schedules::FlashTileLists;
using spattn::schedules::FlashTiles;

template <typename F>
double median_seconds(int repeats, F&& run) {
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// The runs of `a` expanded tile by tile, as the device walks them, against the Thrust lists.
bool same(const FlashTileLists& a, const spattn::device::FlatTileLists& b) {
  const spattn::device::FlatTileLists flat = spattn::device::flatten_tile_lists({&a});
  return flat.tile_ptr == b.tile_ptr && flat.partial_ptr == b.partial_ptr && flat.entries == b.entries &&
         flat.bits == b.bits && flat.bit_words == b.bit_words;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 131072;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  std::vector<std::string> specs{"causal", "sliding_window:w=256"};
  if (argc > 3) specs.assign(argv + 3, argv + argc);
  const FlashTiles tiles{64, 64, 64, 64};
  std::printf("n = %lld, tiles 64 x 64, both directions, median of %d\n", static_cast<long long>(n),
              repeats);
  std::printf("%-24s %14s %10s %10s %18s %12s %8s\n", "mask", "nnz", "stored", "partial",
              "build_flash_mask s", "thrust cpp s", "equal");
  for (const std::string& spec : specs) {
    const spattn::Mask mask = spattn::Mask::from_spec(spec, n, n);
    const auto csr = mask.csr();
    FlashMask want;
    spattn::device::FlatTileLists rows, cols;
    const double host = median_seconds(repeats, [&] {
      want = spattn::schedules::build_flash_mask(csr, n, n, tiles, spattn::Pass::backward);
    });
    const double thrust = median_seconds(repeats, [&] {
      rows = build_tile_lists_thrust_host(csr, n, n, 64, 64, ListDirection::query_rows);
      cols = build_tile_lists_thrust_host(csr, n, n, 64, 64, ListDirection::key_cols);
    });
    const bool equal = same(want.query_rows, rows) && same(want.key_cols, cols);
    std::printf("%-24s %14lld %10lld %10lld %18.3f %12.3f %8s\n", spec.c_str(),
                static_cast<long long>(mask.nnz()),
                static_cast<long long>(want.query_rows.num_stored() + want.key_cols.num_stored()),
                static_cast<long long>(want.query_rows.num_partial() + want.key_cols.num_partial()),
                host, thrust, equal ? "yes" : "NO");
    if (!equal) return 1;
  }
  return 0;
}
