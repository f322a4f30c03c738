#include "roofline.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(SPATTN_OPENBLAS_PATH)
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace spattn::bench {

bool have_sgemm() {
#if defined(SPATTN_OPENBLAS_PATH)
  return true;
#else
  return false;
#endif
}

#if defined(SPATTN_OPENBLAS_PATH)
namespace {

// cblas_sgemm and openblas_set_num_threads; the enums are plain ints in the C ABI
// (CblasRowMajor = 101, CblasNoTrans = 111).
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
using SetThreads = void (*)(int);

// In the child: load OpenBLAS, time the multiplies, return the best time (< 0 on failure).
// What the child process reports through the pipe.
struct SgemmReport {
  double seconds = -1.0;
  char core[32] = {};
};

SgemmReport best_sgemm(int size, int repetitions, int threads) {
  SgemmReport report;
  void* library = dlopen(SPATTN_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return report;
  using CoreName = char* (*)();
  const auto core_name = reinterpret_cast<CoreName>(dlsym(library, "openblas_get_corename"));
  if (core_name != nullptr && core_name() != nullptr) {
    std::strncpy(report.core, core_name(), sizeof report.core - 1);
  }
  const auto sgemm = reinterpret_cast<Sgemm>(dlsym(library, "cblas_sgemm"));
  const auto set_threads = reinterpret_cast<SetThreads>(dlsym(library, "openblas_set_num_threads"));
  if (sgemm == nullptr) return report;
  if (set_threads != nullptr) set_threads(threads);
  const auto count = static_cast<size_t>(size) * static_cast<size_t>(size);
  std::vector<float> a(count), b(count), c(count, 0.0f);
  uint64_t state = 12345;
  for (size_t i = 0; i < count; ++i) {  // a small LCG: the values only need to be finite
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    a[i] = static_cast<float>(static_cast<double>(state >> 40) / 16777216.0 - 0.5);
    b[i] = a[i] * 0.5f;
  }
  auto run = [&] {
    sgemm(101, 111, 111, size, size, size, 1.0f, a.data(), size, b.data(), size, 0.0f, c.data(), size);
  };
  run();  // warm-up: OpenBLAS starts its threads and pages the buffers in
  double best = 1e30;
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  report.seconds = best;
  return report;
}

}  // namespace
#endif

std::optional<Roofline> measure_sgemm(int size, int repetitions, int threads) {
#if defined(SPATTN_OPENBLAS_PATH)
  // A child process loads OpenBLAS, so its threads (which spin for a while after each call) are
  // gone before any attention run is timed.
  int fds[2];
  if (pipe(fds) != 0) return std::nullopt;
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return std::nullopt;
  }
  if (child == 0) {
    close(fds[0]);
    const SgemmReport report = best_sgemm(size, repetitions, threads);
    const ssize_t written = write(fds[1], &report, sizeof report);
    _exit(written == static_cast<ssize_t>(sizeof report) ? 0 : 1);
  }
  close(fds[1]);
  SgemmReport report;
  const ssize_t got = read(fds[0], &report, sizeof report);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != static_cast<ssize_t>(sizeof report) || report.seconds <= 0.0) return std::nullopt;
  const double seconds = report.seconds;
  Roofline result;
  result.size = size;
  result.seconds = seconds;
  result.core.assign(report.core, strnlen(report.core, sizeof report.core));
  const double n = size;
  result.gflops = 2.0 * n * n * n / seconds * 1e-9;
  return result;
#else
  (void)size;
  (void)repetitions;
  (void)threads;
  return std::nullopt;
#endif
}

}  // namespace spattn::bench
