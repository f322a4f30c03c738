// spattn_bench --masks as a user writes it: a comma-separated list in which a spec's own
// parameters also follow commas ("dilated_window:w=4,dilation=3,causal" is two masks), each mask
// a row of the table and of the CSV (the spec quoted there, as RFC 4180 quotes a field holding a
// comma), and a clear error for a list whose pieces make no mask. Times are never asserted.
#include "support/bench_program.hpp"

#include <spattn/mask.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

using spattn_test::ProgramResult;
using spattn_test::read_csv;
using spattn_test::run_bench;
using BenchMasksTest = spattn_test::BenchProgramTest;

TEST_F(BenchMasksTest, ASpecKeepsTheParametersAfterItsCommas) {
  const fs::path csv = dir_ / "masks.csv";
  const ProgramResult result =
      run_bench("--masks dilated_window:w=4,dilation=3,causal,random:p=0.3,seed=7 --n 64 --d 8 "
                "--algorithms flash --reps 1 --min-seconds 0 --threads 1 --no-sgemm --csv " + csv.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;

  const std::vector<std::string> specs = {"dilated_window:w=4,dilation=3", "causal", "random:p=0.3,seed=7"};
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), specs.size()) << result.output;
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(rows[i].at("mask"), specs[i]);
    // The row ran the whole spec: its density is the spec's, not that of the spec cut at a comma.
    const double density = spattn::Mask::from_spec(specs[i], 64, 64).density();
    ASSERT_GT(density, 0.0);
    ASSERT_LT(density, 1.0);
    EXPECT_NEAR(std::strtod(rows[i].at("density").c_str(), nullptr), density, 1e-5) << specs[i];
    EXPECT_NE(result.output.find(specs[i]), std::string::npos) << result.output;
  }
  // The parameters matter: the cut spec is a different mask.
  EXPECT_NE(spattn::Mask::from_spec("dilated_window:w=4", 64, 64).nnz(),
            spattn::Mask::from_spec(specs[0], 64, 64).nnz());
}

TEST_F(BenchMasksTest, APieceThatMakesNoMaskIsAClearError) {
  // "dilation=2" continues "causal", which takes no such parameter; "nosuch" is no pattern.
  for (const std::string masks : {"causal,dilation=2", "full,nosuch"}) {
    const ProgramResult result = run_bench("--masks " + masks + " --n 16 --d 8 --algorithms flash --reps 1 "
                                           "--min-seconds 0 --threads 1 --no-sgemm");
    EXPECT_NE(result.exit_code, 0) << masks << "\n" << result.output;
    const std::string named = masks == "full,nosuch" ? "nosuch" : "dilation";
    EXPECT_NE(result.output.find(named), std::string::npos) << result.output;
  }
}

}  // namespace
