// The roofline reference of spattn_bench: this machine's single-precision matrix multiply
// (OpenBLAS cblas_sgemm), measured in the same run with the same thread count.
#pragma once

#include <optional>
#include <string>

namespace spattn::bench {

struct Roofline {
  int size = 0;           // C (size x size) = A (size x size) B (size x size)
  double gflops = 0.0;    // 2 size^3 / best time
  double seconds = 0.0;   // the best of the repetitions
  // The kernels OpenBLAS chose (openblas_get_corename): its CPU detection can fall back to a
  // generic core on a virtual CPU ("Prescott", 10 to 20x slower); OPENBLAS_CORETYPE overrides it.
  std::string core;
};

// Whether the bench was built with OpenBLAS.
bool have_sgemm();
// Times `repetitions` sgemm calls (after one warm-up) on `threads` OpenBLAS threads and keeps the
// best; nullopt when built without OpenBLAS.
std::optional<Roofline> measure_sgemm(int size, int repetitions, int threads);

}  // namespace spattn::bench
