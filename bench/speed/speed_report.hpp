// spattn_bench's output: the results table, the CSV, and the targets checked against the
// measured numbers (reported, never asserted).
#pragma once

#include "roofline.hpp"
#include "speed_cases.hpp"

#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace spattn::bench {

// "flash", or "auto>flash" (auto and what it ran; "auto>small_cache/flash" when the passes differ).
std::string algorithm_label(const CaseResult& result);

void print_table_header(std::ostream& out, const std::optional<Roofline>& roofline);
void print_table_row(std::ostream& out, const CaseResult& result,
                     const std::optional<Roofline>& roofline);
void write_csv(const std::string& path, const std::vector<CaseResult>& results,
               const std::optional<Roofline>& roofline);

// The targets of the speed issue, evaluated on whatever cases the run measured:
//   full mask, n 4096, d 64: fwd+bwd GFLOP/s >= 30% of the same-run sgemm GFLOP/s;
//   sliding window w = 128, n 4096: time <= 1.3 x (full-mask time x density);
//   auto never slower than the faster of flash and small_cache by more than 10%.
void print_targets(std::ostream& out, const std::vector<CaseResult>& results,
                   const std::optional<Roofline>& roofline);

// --window-target: the window target measured as a ratio within one run. `full` and `window`
// come from one run_case call (same n, d, algorithm, M), so their i-th repetitions ran side by
// side under the same load: window_i / (full_i x density) is a ratio measured at one time, where
// the medians of cases run minutes apart compare two different loads.
struct WindowRatio {
  CaseResult full;
  CaseResult window;
  double of_medians = 0.0;  // window.both_s / (full.both_s x density): the target's ratio
  int pairs = 0;            // repetitions paired
  double pair_median = 0.0, pair_min = 0.0, pair_max = 0.0;  // of window_i / (full_i x density)
  bool met() const { return of_medians <= 1.3; }
};
WindowRatio window_ratio(const CaseResult& full, const CaseResult& window);
void print_window_targets(std::ostream& out, const std::vector<WindowRatio>& ratios);
void write_window_csv(const std::string& path, const std::vector<WindowRatio>& ratios);

}  // namespace spattn::bench
