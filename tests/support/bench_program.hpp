// spattn_bench run as a user runs it, for the tests of its modes (bench_window_target_test.cpp,
// bench_masks_test.cpp): the program's path, its CSV read back, and a fixture with a scratch
// directory. Times are never asserted there, only how the reported numbers relate to each other.
#pragma once

#include "support/csv_fields.hpp"
#include "support/run_program.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

// SPATTN_BENCH_PATH comes with a build dependency on spattn_bench (tests/CMakeLists.txt); without
// it the tests look in the build directory and skip where the bench was not built
// (SPATTN_BUILD_CLI off).
#ifdef SPATTN_BENCH_PATH
inline constexpr bool kBenchRequired = true;
#else
inline constexpr bool kBenchRequired = false;
#define SPATTN_BENCH_PATH SPATTN_BINARY_DIR "/spattn_bench"
#endif

namespace spattn_test {

inline ProgramResult run_bench(const std::string& arguments) {
  return run_program(std::string(SPATTN_BENCH_PATH) + " " + arguments);
}

// The CSV as one map per row, keyed by the header's names; every row has the header's width.
inline std::vector<std::map<std::string, std::string>> read_csv(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::string line;
  std::vector<std::string> names;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(file, line)) {
    const std::vector<std::string> fields = csv_fields(line);
    if (names.empty()) {
      names = fields;
      continue;
    }
    EXPECT_EQ(fields.size(), names.size()) << line;
    std::map<std::string, std::string>& row = rows.emplace_back();
    for (size_t i = 0; i < names.size() && i < fields.size(); ++i) row[names[i]] = fields[i];
  }
  return rows;
}

// A test of spattn_bench: skipped where the bench is not built, with a fresh scratch directory
// dir_ named after the test and the process.
class BenchProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kBenchRequired && !std::filesystem::exists(SPATTN_BENCH_PATH)) {
      GTEST_SKIP() << SPATTN_BENCH_PATH << " is not built (target spattn_bench)";
    }
    ASSERT_TRUE(std::filesystem::exists(SPATTN_BENCH_PATH)) << SPATTN_BENCH_PATH << " is not built (target spattn_bench)";
    dir_ = std::filesystem::temp_directory_path() /
           ("spattn_bench_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name() + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

}  // namespace spattn_test
