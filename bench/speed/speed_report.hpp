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

}  // namespace spattn::bench
