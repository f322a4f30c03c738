// spattn_bench --window-target as a user meets it: the full and window masks timed together, the
// ratio window / (full x density) reported from the medians and per repetition, the CSV agreeing
// with the text, and a clear error for flags it cannot take. Times are never asserted (they are
// measured in bench/), only how the reported numbers relate to one another and to the mask.
#include "support/bench_program.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using spattn_test::ProgramResult;
using spattn_test::read_csv;
using spattn_test::run_bench;

double number(const std::map<std::string, std::string>& row, const std::string& name) {
  const auto it = row.find(name);
  EXPECT_NE(it, row.end()) << "CSV column " << name;
  return it == row.end() ? 0.0 : std::strtod(it->second.c_str(), nullptr);
}

// Density of the bench's `window` mask (sliding_window:w=128: key j attends query i when
// |i - j| <= 128), counted pair by pair.
double window_density(int64_t n) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) pairs += (i - j <= 128 && j - i <= 128) ? 1 : 0;
  }
  return static_cast<double>(pairs) / static_cast<double>(n * n);
}

using BenchWindowTargetTest = spattn_test::BenchProgramTest;

TEST_F(BenchWindowTargetTest, ReportsTheRatioFromMediansAndPerRepetition) {
  const fs::path csv = dir_ / "window.csv";
  // --min-seconds 0: exactly --reps repetitions (by default short cases repeat for 0.1 s).
  const ProgramResult result = run_bench("--window-target --n 300 --d 16 --algorithms flash,auto --reps 3 "
                                  "--min-seconds 0 --threads 1 --csv " + csv.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("target <= 1.3x"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("per repetition (3 pairs)"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("sgemm"), std::string::npos) << "no roofline in this mode\n" << result.output;

  // One row per algorithm, each pairing full and window at n 300, d 16.
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 2u) << result.output;
  EXPECT_EQ(rows[0].at("algorithm"), "flash");
  EXPECT_EQ(rows[1].at("algorithm"), "auto");
  const double density = window_density(300);
  ASSERT_GT(density, 0.5);  // 300 rows, half-width 128: not trivially full or empty
  ASSERT_LT(density, 1.0);
  for (const auto& row : rows) {
    EXPECT_EQ(number(row, "seqlen"), 300.0);
    EXPECT_EQ(number(row, "head_dim"), 16.0);
    EXPECT_NEAR(number(row, "density"), density, 1e-5);
    EXPECT_EQ(number(row, "pairs"), 3.0);
    const double full_ms = number(row, "full_ms"), window_ms = number(row, "window_ms");
    ASSERT_GT(full_ms, 0.0);
    ASSERT_GT(window_ms, 0.0);
    // The target's ratio is the medians' (the CSV keeps 6 significant digits).
    const double ratio = number(row, "ratio_of_medians");
    EXPECT_NEAR(ratio, window_ms / (full_ms * density), 1e-4 * ratio);
    EXPECT_EQ(number(row, "target_met"), ratio <= 1.3 ? 1.0 : 0.0);
    // The text says the same (two decimals) and whether it met the target.
    char verdict[64];
    std::snprintf(verdict, sizeof verdict, "%.2fx (target <= 1.3x): %s", ratio,
                  ratio <= 1.3 ? "met" : "NOT met");
    EXPECT_NE(result.output.find(verdict), std::string::npos) << verdict << "\n" << result.output;
    // The per-repetition ratios: the median between the extremes.
    EXPECT_LE(number(row, "pair_ratio_min"), number(row, "pair_ratio_median"));
    EXPECT_LE(number(row, "pair_ratio_median"), number(row, "pair_ratio_max"));
    EXPECT_GT(number(row, "pair_ratio_min"), 0.0);
  }
}

TEST_F(BenchWindowTargetTest, RejectsFlagsOfOtherModes) {
  for (const std::string flag : {"--masks full", "--memory"}) {
    const ProgramResult result = run_bench("--window-target " + flag);
    EXPECT_NE(result.exit_code, 0) << flag << "\n" << result.output;
    EXPECT_NE(result.output.find("--window-target"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find(flag.substr(0, flag.find(' '))), std::string::npos) << result.output;
  }
}

}  // namespace
