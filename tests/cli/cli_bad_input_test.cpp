// The spattn program on adversarial input: outputs replaced as a whole set or not at all, checks
// before work (a bad --out, a shape mismatch of a wide sparse input), non-finite and out-of-range
// values refused by name, extreme M and n planned in bounded time or refused by name.
#include <sparse_formats/npy.hpp>

#include "support/run_program.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#ifndef SPATTN_CLI_PATH
#error "cli_bad_input_test needs SPATTN_CLI_PATH (the CLI target must be built)"
#endif

namespace fs = std::filesystem;

namespace {

using Result = spattn_test::ProgramResult;

Result run(const std::string& arguments) { return spattn_test::run_program(std::string(SPATTN_CLI_PATH) + " " + arguments); }

class CliBadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spattn_cli_bad_input_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A (rows, cols) float64 .npy of 0.01 * (i + 1), with `special` at element `at` when given.
  std::string write_tensor(const std::string& name, int64_t rows, int64_t cols, int64_t at = -1, double special = 0) {
    std::vector<double> values(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < values.size(); ++i) values[i] = 0.01 * static_cast<double>(i % 17 + 1);
    if (at >= 0) values[static_cast<size_t>(at)] = special;
    const std::string path = (dir_ / name).string();
    sparse_formats::write_npy<double>(path, values.data(), {rows, cols});
    return path;
  }
  std::string inputs(int64_t n, int64_t d) {
    return "attention --q " + write_tensor("q.npy", n, d) + " --k " + write_tensor("k.npy", n, d) + " --v " +
           write_tensor("v.npy", n, d);
  }
  std::vector<std::string> listing(const fs::path& directory) const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

}  // namespace

TEST_F(CliBadInputTest, ATargetThatIsADirectoryIsRefusedBeforeAnyFileMoves) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out / "lse.npy");  // in the way of the second output
  const Result r = run(inputs(9, 4) + " --mask causal --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("lse.npy' exists and is not a regular file"), std::string::npos) << r.output;
  EXPECT_EQ(listing(out), std::vector<std::string>{"lse.npy"});  // no o.npy moved in
  EXPECT_TRUE(fs::is_directory(out / "lse.npy"));
}

TEST_F(CliBadInputTest, AForwardRunReplacesTheWholeSetOfAnEarlierBackwardRun) {
  const fs::path out = dir_ / "out";
  const std::string args = inputs(9, 4) + " --mask causal --out " + out.string();
  ASSERT_EQ(run(args + " --do " + write_tensor("do.npy", 9, 4)).exit_code, 0);
  EXPECT_EQ(listing(out), (std::vector<std::string>{"dk.npy", "dq.npy", "dv.npy", "lse.npy", "o.npy"}));
  std::ofstream(out / "notes.txt") << "kept: not one of spattn's outputs\n";
  const Result r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(listing(out), (std::vector<std::string>{"lse.npy", "notes.txt", "o.npy"}));
}

TEST_F(CliBadInputTest, ABadOutIsFoundBeforeTheInputsAreRead) {
  std::ofstream(dir_ / "file") << "a regular file\n";
  const Result r = run("attention --q /nonexistent/q.npy --k k.npy --v v.npy --mask full --out " +
                       (dir_ / "file").string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--out"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("/nonexistent/q.npy"), std::string::npos) << r.output;  // inputs not touched yet
}

TEST_F(CliBadInputTest, AWideSparseQueryIsRefusedByShapeWithoutBeingDensified) {
  // q: 4 x 2000000000 with one stored entry. Densified it would be 64 GB; its head_dim disagrees with k's.
  std::ofstream(dir_ / "q.mtx") << "%%MatrixMarket matrix coordinate real general\n4 2000000000 1\n1 1 0.5\n";
  const Result r = run("attention --q " + (dir_ / "q.mtx").string() + " --k " + write_tensor("k.npy", 4, 3) +
                       " --v " + write_tensor("v.npy", 4, 3) + " --mask full --out " + (dir_ / "out").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--k has head_dim 3, --q has 2000000000"), std::string::npos) << r.output;
}

TEST_F(CliBadInputTest, NonFiniteAndOutOfRangeValuesAreRefusedByName) {
  const std::string rest = " --k " + write_tensor("k.npy", 9, 4) + " --v " + write_tensor("v.npy", 9, 4) +
                           " --mask causal --out " + (dir_ / "out").string();
  for (const char* algorithm : {"reference", "flash", "small_cache", "auto"}) {
    const std::string q_nan = write_tensor("q_nan.npy", 9, 4, 13, std::numeric_limits<double>::quiet_NaN());
    Result r = run("attention --q " + q_nan + rest + " --algorithm " + algorithm);
    EXPECT_EQ(r.exit_code, 1) << algorithm << ": " << r.output;
    EXPECT_NE(r.output.find("q[0, 0, 3, 1] = nan is not finite"), std::string::npos) << algorithm << ": " << r.output;
    const std::string q_inf = write_tensor("q_inf.npy", 9, 4, 5, -std::numeric_limits<double>::infinity());
    r = run("attention --q " + q_inf + rest + " --algorithm " + algorithm);
    EXPECT_EQ(r.exit_code, 1) << algorithm << ": " << r.output;
    EXPECT_NE(r.output.find("q[0, 0, 1, 1] = -inf is not finite"), std::string::npos) << algorithm << ": " << r.output;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << algorithm;
  }
  // 1e300 is finite in float64 (the reference runs it) but not in the scheduled algorithms' float32.
  const std::string q_big = write_tensor("q_big.npy", 9, 4, 2, 1e300);
  const Result r = run("attention --q " + q_big + rest + " --algorithm flash");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--q: element 2 = 1e+300 is outside float32's range"), std::string::npos) << r.output;
}

TEST_F(CliBadInputTest, AnMPastWhatTheProblemUsesPlansAndRuns) {
  // 2^62 words: the flash tile fit once overflowed int64 here and counted up one row at a time.
  const std::string args = inputs(33, 8) + " --mask causal --cache-words 4611686018427387904";
  for (const char* algorithm : {"flash", "small_cache", "auto"}) {
    const Result r = run(args + " --algorithm " + algorithm + " --out " + (dir_ / algorithm).string());
    EXPECT_EQ(r.exit_code, 0) << algorithm << ": " << r.output;
  }
  const Result plan = run("plan --n 1024 --d 64 --mask causal --cache-words 9223372036854775807 --pass both");
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("M exceeds 3.15392e+06 words, twice the whole head"), std::string::npos) << plan.output;
  // The same tiles as at an M just past that.
  const Result just_past = run("plan --n 1024 --d 64 --mask causal --cache-words 3153921 --pass both");
  auto tiles = [](const std::string& text) {
    std::string lines;
    for (size_t at = text.find("tiles "); at != std::string::npos; at = text.find("tiles ", at + 1)) {
      lines += text.substr(at, text.find('\n', at) - at) + "\n";
    }
    return lines;
  };
  EXPECT_FALSE(tiles(plan.output).empty());
  EXPECT_EQ(tiles(plan.output), tiles(just_past.output));
}

TEST_F(CliBadInputTest, ExtremeSequenceLengthsAreRefusedByNameOrPlannedFromShapesAlone) {
  Result r = run("plan --n 288230376151711744 --d 64 --mask full");  // 2^58: n^2 pairs overflow int64
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("overflows int64"), std::string::npos) << r.output;
  r = run("plan --n 4611686018427387904 --d 64 --mask full");  // 2^62: once negative word counts
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("overflows int64"), std::string::npos) << r.output;
  r = run("plan --n 1073741824 --d 64 --mask full");  // 2^30: counts past 2^62 words
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("past the 2^62 that spattn's int64 counts hold"), std::string::npos) << r.output;
  // A dense plan needs the shape only: 10^7 x 64 inputs (7.5 GB) are not allocated.
  r = run("plan --n 10000000 --d 64 --mask full --pass fwd");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
