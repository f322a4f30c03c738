// spattn sweep: axes as lists and ranges, one row per combination, counted I/O equal to the
// library's own prediction (plan_attention), --predict-only, infeasible rows, CSV / JSON outputs
// written atomically, and usage errors that name the argument. Small n keeps the binary fast.
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <nlohmann/json.hpp>

#include "support/csv_fields.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string kCli = std::string(SPATTN_BINARY_DIR) + "/spattn";

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

class CliSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kCli)) GTEST_SKIP() << kCli << " is not built (configure with -DSPATTN_BUILD_CLI=ON)";
    dir_ = fs::temp_directory_path() / ("spattn_cli_sweep_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  Result run(const std::string& arguments) const {
    const std::string err_path = (dir_ / "stderr.txt").string();
    const std::string command = kCli + " " + arguments + " 2> " + err_path;
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

  // Runs the sweep with --json and returns the parsed document.
  json sweep_json(const std::string& arguments) const {
    const Result r = run("sweep " + arguments + " --json " + path("rows.json"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return json::object();
    return json::parse(read_text(path("rows.json")));
  }

  fs::path dir_;
};

std::vector<int64_t> cache_words_of(const json& document) {
  std::vector<int64_t> values;
  for (const auto& row : document.at("rows")) values.push_back(row.at("cache_words").get<int64_t>());
  return values;
}

}  // namespace

TEST_F(CliSweepTest, CountedIoEqualsTheLibrarysPrediction) {
  const json document = sweep_json(
      "--n 64,97 --d 8 --cache-words 64:1024:x4 --mask full --mask causal --mask 'sliding_window:w=16' "
      "--algorithm auto,flash,small_cache --pass fwd,bwd,both");
  const auto& rows = document.at("rows");
  ASSERT_EQ(rows.size(), 2u * 1 * 3 * 3 * 3 * 3);
  int counted = 0;
  for (const auto& row : rows) {
    if (row.at("source") != "counted") continue;
    ++counted;
    const auto n = row.at("seqlen").get<int64_t>();
    const auto d = row.at("head_dim").get<int64_t>();
    const auto spec = row.at("pattern").get<std::string>();
    const spattn::Mask mask = spec == "full" ? spattn::Mask::full(n, n) : spattn::Mask::from_spec(spec, n, n);
    const auto requested = spattn::parse_algorithm(row.at("requested_algorithm").get<std::string>());
    int64_t reads = 0, writes = 0;
    for (spattn::Pass pass : {spattn::Pass::forward, spattn::Pass::backward}) {
      const bool forward = pass == spattn::Pass::forward;
      if (row.at("pass") == (forward ? "bwd" : "fwd")) continue;
      spattn::HeadPlanOptions planning;
      planning.cache_words = row.at("cache_words").get<int64_t>();
      planning.algorithm = requested;
      planning.objective = spattn::PlanObjective::words;
      const auto plan = spattn::plan_heads({n, n, d, d}, mask, pass, planning);
      reads += plan.reads;
      writes += plan.writes;
      EXPECT_EQ(row.at(forward ? "algorithm_forward" : "algorithm_backward"), spattn::algorithm_name(plan.algorithm));
    }
    EXPECT_EQ(row.at("reads").get<int64_t>(), reads) << row.dump();
    EXPECT_EQ(row.at("writes").get<int64_t>(), writes) << row.dump();
    EXPECT_GT(reads, 0);
    EXPECT_LT(row.at("error_to_tolerance").get<double>(), 1.0) << row.dump();
  }
  EXPECT_GT(counted, 100);
}

TEST_F(CliSweepTest, CsvHeaderAndOneRowPerCombination) {
  const Result r = run("sweep --n 32,48 --d 4,8 --cache-words 64,256 --mask causal --csv " + path("rows.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream csv(read_text(path("rows.csv")));
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_EQ(header,
            "pattern,seqlen,head_dim,cache_words,pass,requested_algorithm,source,note,density,z_qk,z_input,"
            "algorithm_forward,algorithm_backward,reads,writes,io_words,predicted_reads,predicted_writes,"
            "line_words,read_lines,write_lines,predicted_read_lines,predicted_write_lines,flash_io_words,small_cache_io_words,bound,bound_large_cache,bound_small_cache,bound_crossover_m,"
            "bound_kind,ratio_to_bound,ratio_to_flash,switch_forward,switch_backward,switches_forward,switches_backward,peak_resident_words,"
            "max_error,error_to_tolerance,plan_ms,forward_ms,backward_ms");
  int rows = 0;
  while (std::getline(csv, line)) ++rows;
  EXPECT_EQ(rows, 2 * 2 * 2);
  // The table went to stdout as well.
  EXPECT_NE(r.out.find("8 rows: 8 counted"), std::string::npos) << r.out;
}

TEST_F(CliSweepTest, CsvQuotesListsOfSeveralSwitches) {
  // The dilated window switches twice backward at n = 256 (702 and 2977 words): the list is one
  // quoted cell, and every row has as many cells as the header.
  const Result r = run("sweep --n 256 --d 64 --cache-words 4096 --mask dilated_window:w=16,dilation=4 --pass bwd "
                       "--predict-only --switch --csv " + path("rows.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream csv(read_text(path("rows.csv")));
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  const std::vector<std::string> names = spattn_test::csv_fields(header);
  int rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    const std::vector<std::string> cells = spattn_test::csv_fields(line);
    ASSERT_EQ(cells.size(), names.size()) << line;
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == "switches_backward") {
        EXPECT_EQ(cells[i], "[702,2977]") << line;
      }
    }
  }
  EXPECT_EQ(rows, 1);
}

TEST_F(CliSweepTest, JsonRecordsHaveEveryKeyOfTheSchema) {
  const json document = sweep_json("--n 40 --d 8 --cache-words 128 --mask 'bigbird:block=8,w=1,g=1,r=1,seed=3'");
  ASSERT_EQ(document.at("rows").size(), 1u);
  const auto& row = document.at("rows")[0];
  std::istringstream csv_header(
      "pattern seqlen head_dim cache_words pass requested_algorithm source note density z_qk z_input "
      "algorithm_forward algorithm_backward reads writes io_words predicted_reads predicted_writes line_words "
      "read_lines write_lines predicted_read_lines predicted_write_lines flash_io_words "
      "small_cache_io_words bound bound_large_cache bound_small_cache bound_crossover_m bound_kind ratio_to_bound "
      "ratio_to_flash switch_forward switch_backward switches_forward switches_backward peak_resident_words max_error error_to_tolerance plan_ms "
      "forward_ms backward_ms");
  std::string key;
  size_t keys = 0;
  while (csv_header >> key) {
    EXPECT_TRUE(row.contains(key)) << key;
    ++keys;
  }
  EXPECT_EQ(row.size(), keys);
  EXPECT_EQ(row.at("bound_kind"), "sparse (worst case over masks)");
  EXPECT_EQ(row.at("io_words").get<int64_t>(), row.at("reads").get<int64_t>() + row.at("writes").get<int64_t>());
  EXPECT_TRUE(row.at("note").is_null());
  EXPECT_EQ(document.at("context").at("command"), "sweep");
}

TEST_F(CliSweepTest, RangesExpandMultiplicativelyAdditivelyAndAsLists) {
  json document = sweep_json("--n 16 --d 4 --cache-words 64:65536:x2 --predict-only");
  EXPECT_EQ(cache_words_of(document),
            (std::vector<int64_t>{64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536}));
  document = sweep_json("--n 16 --d 4 --cache-words 100:400:+100,1000 --predict-only");
  EXPECT_EQ(cache_words_of(document), (std::vector<int64_t>{100, 200, 300, 400, 1000}));
  document = sweep_json("--n 16 --d 4 --cache-words 100:350:+100 --predict-only");
  EXPECT_EQ(cache_words_of(document), (std::vector<int64_t>{100, 200, 300}));
}

TEST_F(CliSweepTest, PredictOnlyFillsRowsFromThePlanWithoutRunning) {
  // n = 20000 would take minutes to run counted with validation; predicted, it takes a moment.
  const json document = sweep_json("--n 20000 --d 64 --cache-words 16384 --mask 'sliding_window:w=16' --predict-only");
  const auto& row = document.at("rows").at(0);
  EXPECT_EQ(row.at("source"), "predicted");
  EXPECT_TRUE(row.at("max_error").is_null());
  EXPECT_TRUE(row.at("forward_ms").is_null());
  EXPECT_TRUE(row.at("peak_resident_words").is_null());
  EXPECT_EQ(row.at("reads"), row.at("predicted_reads"));
  EXPECT_GT(row.at("reads").get<int64_t>(), 20000 * 64);  // at least Q once
}

TEST_F(CliSweepTest, NoValidateLeavesTheErrorEmpty) {
  const json document = sweep_json("--n 32 --d 4 --cache-words 128 --no-validate --pass bwd");
  const auto& row = document.at("rows").at(0);
  EXPECT_EQ(row.at("source"), "counted");
  EXPECT_TRUE(row.at("max_error").is_null());
  EXPECT_TRUE(row.at("algorithm_forward").is_null());
  EXPECT_TRUE(row.at("forward_ms").is_null());
  EXPECT_FALSE(row.at("backward_ms").is_null());
}

TEST_F(CliSweepTest, AnAlgorithmThatDoesNotFitGivesAnInfeasibleRow) {
  const json document = sweep_json("--n 32 --d 8 --cache-words 16,512 --algorithm flash");
  const auto& rows = document.at("rows");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].at("source"), "infeasible");
  EXPECT_NE(rows[0].at("note").get<std::string>().find("needs M >="), std::string::npos) << rows[0].dump();
  EXPECT_TRUE(rows[0].at("reads").is_null());
  EXPECT_EQ(rows[1].at("source"), "counted");
}

TEST_F(CliSweepTest, ASweepInWhichNothingFitsIsARuntimeError) {
  const Result r = run("sweep --n 32 --d 8 --cache-words 16 --algorithm flash");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(last_line(r.err).find("nothing fits"), std::string::npos) << r.err;
  EXPECT_NE(last_line(r.err).find("needs M >="), std::string::npos) << r.err;
}

TEST_F(CliSweepTest, CsvToStdoutReplacesTheTable) {
  const Result r = run("sweep --n 16 --d 4 --cache-words 64 --csv -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("pattern,seqlen,", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2);
}

TEST_F(CliSweepTest, BadArgumentsExitTwoNamingTheArgument) {
  struct Case {
    const char* arguments;
    const char* message;
  };
  for (const Case& c : {Case{"--cache-words 64:32:x2", "--cache-words: range '64:32:x2' is empty: start 64 > end 32"},
                        Case{"--cache-words 64:128:x1", "--cache-words: range '64:128:x1': the factor must be >= 2"},
                        Case{"--cache-words 64:128:y2", "--cache-words: range '64:128:y2': the step 'y2'"},
                        Case{"--cache-words 1:100000:+1", "--cache-words: '1:100000:+1' gives more than 4096 values"},
                        Case{"--n 12x", "--n: '12x' is not an integer"},
                        Case{"--d 0", "--d: values must be >= 1, got 0"},
                        Case{"--algorithm auto,flsh", "--algorithm: 'flsh' is not one of auto, flash, small_cache"},
                        Case{"--pass sideways", "--pass: 'sideways' is not one of fwd, bwd, both"},
                        Case{"--mask nosuch", "--mask"},
                        Case{"--n 1:64 --d 1:64 --cache-words 1:64", "at most 100000 rows"}}) {
    const Result r = run(std::string("sweep ") + c.arguments);
    EXPECT_EQ(r.exit_code, 2) << c.arguments << "\n" << r.err;
    EXPECT_NE(last_line(r.err).find(c.message), std::string::npos) << c.arguments << "\n" << r.err;
  }
}

TEST_F(CliSweepTest, FailedRunsLeaveExistingOutputsUntouched) {
  std::ofstream(path("rows.csv")) << "old\n";
  const Result r = run("sweep --n 16 --d 4 --mask nosuch --csv " + path("rows.csv"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_text(path("rows.csv")), "old\n");
  // A successful run replaces the file and leaves no temporary file beside it.
  ASSERT_EQ(run("sweep --n 16 --d 4 --cache-words 64 --csv " + path("rows.csv")).exit_code, 0);
  EXPECT_EQ(read_text(path("rows.csv")).rfind("pattern,", 0), 0u);
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename().string());
  EXPECT_EQ(names, (std::set<std::string>{"rows.csv", "stderr.txt"}));
}

TEST_F(CliSweepTest, UnreadableMaskFileIsARuntimeError) {
  const Result r = run("sweep --n 16 --d 4 --mask " + path("missing.mtx"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(last_line(r.err).find("missing.mtx"), std::string::npos) << r.err;
}

TEST_F(CliSweepTest, PlotDrawsOnePanelPerProblem) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot is not installed";
  const Result r = run("sweep --n 64 --d 8 --cache-words 16:4096:x4 --mask full --mask causal --plot " + path("io.png"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(path("io.png")).substr(1, 3), "PNG");
}
