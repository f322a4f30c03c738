// spattn run (the main job) and spattn patterns --png, as a user meets them: the table and the
// summary, CSV and JSON outputs written all or nothing, the plot, exit codes 0 / 1 / 2 with one
// line naming the argument. Small sizes (n <= 128) keep the binary fast.
#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

const std::string kCli = std::string(SPATTN_BINARY_DIR) + "/spattn";

struct Result {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class CliRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kCli)) GTEST_SKIP() << kCli << " is not built (configure with -DSPATTN_BUILD_CLI=ON)";
    dir_ = fs::temp_directory_path() / ("spattn_cli_run_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Runs `spattn ARGUMENTS` (a shell command line; `environment` is prefixed to it).
  Result run(const std::string& arguments, const std::string& environment = "") const {
    const std::string err_path = (dir_ / "stderr.txt").string();
    const std::string command = environment + " " + kCli + " " + arguments + " 2> " + err_path;
    Result result;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return result;
    std::array<char, 4096> buffer{};
    size_t n = 0;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.out.append(buffer.data(), n);
    const int status = pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.err = read_text(err_path);
    return result;
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

// The last non-empty line of stderr: the one error line (progress lines come before it).
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

const char* kSmall = "run --n 96 --d 8 --cache-words 32,64,512 --mask full --mask causal";

}  // namespace

TEST_F(CliRunTest, SmallRunPrintsTheTableAndTheSummary) {
  const Result r = run(kSmall);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* part : {"pattern", "Z_QK", "flash I/O", "max err", "Summary", "switch M (backward; every one)",
                           "all 6 counted runs (2 masks x 3 cache sizes", "full", "causal"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
  // M = 32 < d^2 = 64: small_cache (flash does not even fit); M = 512 = 8 d^2: flash.
  EXPECT_NE(r.out.find("small_cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  flash "), std::string::npos) << r.out;
  // Progress goes to stderr, one line per step when it is not a terminal.
  EXPECT_NE(r.err.find("[1/"), std::string::npos) << r.err;
}

TEST_F(CliRunTest, CsvHasTheHeaderAndOneRowPerMaskCacheSizeAndLineSize) {
  const Result r = run(std::string(kSmall) + " --csv " + path("rows.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream csv(read_text(path("rows.csv")));
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header.rfind("pattern,seqlen,head_dim,cache_words,pass,requested_algorithm,source,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    EXPECT_NE(line.find(",both,auto,counted,"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 2 * 3 * 2);  // masks x M x the two models (L = 1 and 16)
}

TEST_F(CliRunTest, JsonHasTheContextAndCountedRowsEqualToTheirPrediction) {
  const Result r = run(std::string(kSmall) + " --json " + path("rows.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto document = nlohmann::json::parse(read_text(path("rows.json")));
  EXPECT_EQ(document.at("schema"), "spattn-rows/1");
  const auto& context = document.at("context");
  EXPECT_EQ(context.at("command"), "run");
  for (const char* key : {"version", "git_commit", "build_type", "cpu_model", "detected_cache_words", "arguments"}) {
    EXPECT_TRUE(context.contains(key)) << key;
  }
  EXPECT_GT(context.at("detected_cache_words").get<int64_t>(), 0);
  const auto& rows = document.at("rows");
  // Both models by default: the word model's 6 rows (L = 1), then 6 in lines of 16 words.
  ASSERT_EQ(rows.size(), 12u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.at("line_words"), i < 6 ? 1 : 16);
    EXPECT_EQ(row.at("source"), "counted");
    EXPECT_EQ(row.at("reads"), row.at("predicted_reads"));
    EXPECT_EQ(row.at("writes"), row.at("predicted_writes"));
    EXPECT_GT(row.at("reads").get<int64_t>(), 0);
    EXPECT_GT(row.at("read_lines").get<int64_t>(), 0);  // counted: every row has them
    EXPECT_EQ(row.at("read_lines"), row.at("predicted_read_lines"));
    EXPECT_EQ(row.at("write_lines"), row.at("predicted_write_lines"));
    if (i < 6) {
      EXPECT_EQ(row.at("read_lines"), row.at("reads"));  // a line is a word
    }
    EXPECT_LT(row.at("error_to_tolerance").get<double>(), 1.0);
    EXPECT_FALSE(row.at("algorithm_forward").is_null());
    EXPECT_FALSE(row.at("algorithm_backward").is_null());
    EXPECT_GT(row.at("forward_ms").get<double>(), 0.0);
  }
  // The full mask is always searched for the planner's switch M; in 16-word lines at d = 8 (a row
  // is half a line) flash moves fewer lines at every M, so there is none.
  EXPECT_TRUE(rows[6].at("switches_backward").is_array());
  EXPECT_TRUE(rows[6].at("switch_backward").is_null());
  EXPECT_EQ(rows[0].at("z_qk"), 96 * 96);
  EXPECT_EQ(rows[3].at("z_qk"), 96 * 97 / 2);
}

TEST_F(CliRunTest, OneLineSizeGivesOneSectionAndABadOneIsAUsageError) {
  const Result r = run(std::string(kSmall) + " --line-words 16 --json " + path("rows.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("== In lines of L = 16 words"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("word model (L = 1"), std::string::npos);
  EXPECT_EQ(r.out.find("Both models"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(read_text(path("rows.json"))).at("rows").size(), 6u);
  const Result bad = run(std::string(kSmall) + " --line-words 1,12");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--line-words: 12 is not a power of two"), std::string::npos) << bad.err;
}

TEST_F(CliRunTest, PlotWritesAPng) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  const Result r = run(std::string(kSmall) + " --plot " + path("io.png"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string png = read_text(path("io.png"));
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
}

TEST_F(CliRunTest, MissingGnuplotIsAClearErrorBeforeAnyWork) {
  const Result r = run(std::string(kSmall) + " --plot " + path("io.png"), "PATH=/nonexistent");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(last_line(r.err).find("--plot: gnuplot is not installed"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[1/"), std::string::npos) << "it ran before failing:\n" << r.err;
  EXPECT_FALSE(fs::exists(path("io.png")));
}

TEST_F(CliRunTest, UsageErrorsExitTwoAndNameTheArgument) {
  Result r = run("run --n 64 --mask nosuch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(last_line(r.err).find("--mask"), std::string::npos) << r.err;
  EXPECT_NE(last_line(r.err).find("nosuch"), std::string::npos) << r.err;
  r = run("run --n 64 --cache-words 64:32:x2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(last_line(r.err).find("--cache-words: range '64:32:x2' is empty"), std::string::npos) << r.err;
  r = run("run --n 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(last_line(r.err).find("--n"), std::string::npos) << r.err;
  r = run("run --n 64 --algorithm fast");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(last_line(r.err).find("--algorithm: 'fast' is not one of"), std::string::npos) << r.err;
}

TEST_F(CliRunTest, InfeasibleCacheSizeIsARuntimeError) {
  const Result r = run("run --n 64 --d 8 --mask full --cache-words 16 --algorithm flash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(last_line(r.err).find("needs M >="), std::string::npos) << r.err;
}

TEST_F(CliRunTest, UnwritableOutputFailsAtOnceAndWritesNothing) {
  for (const char* flag : {"--csv", "--json", "--plot"}) {
    const Result r = run(std::string(kSmall) + " " + flag + " " + path("missing/out"));
    EXPECT_EQ(r.exit_code, 1) << flag;
    EXPECT_NE(last_line(r.err).find(flag), std::string::npos) << r.err;
    EXPECT_NE(last_line(r.err).find("does not exist"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("[1/"), std::string::npos) << "it ran before failing:\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(path("missing")));
}

TEST_F(CliRunTest, PatternsDrawsAMaskAsPng) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  const Result r = run("patterns 'sliding_window:w=8' --n 64 --png " + path("mask.png"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + path("mask.png")), std::string::npos) << r.out;
  EXPECT_EQ(read_text(path("mask.png")).substr(1, 3), "PNG");
  // No temporary files are left beside it.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) files += entry.path().extension() == ".png" ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST_F(CliRunTest, PatternsPngNeedsASpec) {
  const Result r = run("patterns --png " + path("mask.png"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(last_line(r.err).find("--png"), std::string::npos) << r.err;
}
