#include "memory_mode.hpp"

#include "speed_cases.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <sys/resource.h>

namespace spattn::bench {

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void run_memory_mode(std::ostream& out, const MemorySettings& settings) {
  char line[256];
  std::snprintf(line, sizeof line, "peak RSS before any case: %.1f MiB\n", peak_rss_mib());
  out << line;
  // The first fwd+bwd of a mask builds what the API caches in it (the flash tile lists, the
  // planner's structures); the second shows the steady state.
  std::snprintf(line, sizeof line, "%8s %4s %6s %12s %9s %9s %8s %11s %11s %11s %11s %12s\n", "n", "d",
                "window", "nnz", "mask MiB", "data MiB", "build s", "fwd cold s", "bwd cold s",
                "fwd warm s", "bwd warm s", "peak RSS MiB");
  out << line;
  std::vector<int64_t> seqlens = settings.seqlens;
  std::sort(seqlens.begin(), seqlens.end());
  for (const int64_t n : seqlens) {
    auto start = std::chrono::steady_clock::now();
    const Mask mask = Mask::from_spec("sliding_window:w=" + std::to_string(settings.window), n, n);
    SpeedProblem problem(1, n, settings.head_dim, 7);
    const double build_s = seconds_since(start);
    AttentionOptions options;
    options.algorithm = Algorithm::flash;
    options.threads = settings.threads;
    options.cache_words = settings.cache_words;
    double forward_s[2], backward_s[2];
    for (int run = 0; run < 2; ++run) {
      start = std::chrono::steady_clock::now();
      problem.forward(mask, options);
      forward_s[run] = seconds_since(start);
      start = std::chrono::steady_clock::now();
      problem.backward(mask, options);
      backward_s[run] = seconds_since(start);
    }
    // The element CSR: row_ptr and col_idx, 8-byte indices.
    const double mask_mib = static_cast<double>((n + 1 + mask.nnz()) * 8) / (1024.0 * 1024.0);
    // Q, K, V, dO, O, dQ, dK, dV (n x d each) and LSE (n), fp32.
    const double data_mib = static_cast<double>((8 * n * settings.head_dim + n) * 4) / (1024.0 * 1024.0);
    std::snprintf(line, sizeof line,
                  "%8lld %4lld %6lld %12lld %9.1f %9.1f %8.2f %11.2f %11.2f %11.3f %11.3f %12.1f\n",
                  static_cast<long long>(n), static_cast<long long>(settings.head_dim),
                  static_cast<long long>(settings.window), static_cast<long long>(mask.nnz()), mask_mib,
                  data_mib, build_s, forward_s[0], backward_s[0], forward_s[1], backward_s[1],
                  peak_rss_mib());
    out << line;
    out.flush();
  }
}

}  // namespace spattn::bench
