// The spattn program as a user meets it: exit codes (0 ok, 1 runtime error, 2 usage error), one
// clear line per error naming the argument, outputs written all or nothing.
#include <sparse_formats/npy.hpp>
#include <spattn/elements.hpp>

#include "support/run_program.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef SPATTN_CLI_PATH
#error "cli_test needs SPATTN_CLI_PATH (the CLI target must be built)"
#endif

namespace fs = std::filesystem;

namespace {

using Result = spattn_test::ProgramResult;

Result run(const std::string& arguments) { return spattn_test::run_program(std::string(SPATTN_CLI_PATH) + " " + arguments); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spattn_cli_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_tensor(const std::string& name, std::vector<int64_t> shape, unsigned seed) {
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> values(static_cast<size_t>(count));
    for (float& value : values) value = uniform(rng);
    const std::string path = (dir_ / name).string();
    sparse_formats::write_npy<float>(path, values.data(), shape);
    return path;
  }
  std::string tensors(int64_t n, int64_t d) {
    return "attention --q " + write_tensor("q.npy", {n, d}, 1) + " --k " + write_tensor("k.npy", {n, d}, 2) +
           " --v " + write_tensor("v.npy", {n, d}, 3);
  }
  fs::path dir_;
};

}  // namespace

TEST_F(CliTest, VersionAndHelpExitZero) {
  const Result version = run("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("spattn 0."), std::string::npos) << version.output;
  const Result help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* command : {"patterns", "attention", "plan", "bound", "run"}) {
    EXPECT_NE(help.output.find(command), std::string::npos) << command;
  }
}

TEST_F(CliTest, PatternsListsEveryPatternAndShowsOne) {
  const Result list = run("patterns");
  EXPECT_EQ(list.exit_code, 0);
  for (const char* name : {"causal", "sliding_window", "bigbird", "documents", "random"}) {
    EXPECT_NE(list.output.find(name), std::string::npos) << name;
  }
  const Result show = run("patterns causal --n 8 --block 4");
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("attended pairs: 36"), std::string::npos) << show.output;
  EXPECT_NE(show.output.find("3 stored (1 full, 2 partial)"), std::string::npos) << show.output;
}

TEST_F(CliTest, UnknownPatternIsAUsageErrorNamingTheFlag) {
  const Result r = run("patterns nosuch --n 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("nosuch"), std::string::npos) << r.output;
}

TEST_F(CliTest, AttentionWritesForwardAndBackwardOutputs) {
  const std::string out = (dir_ / "out").string();
  const Result r = run(tensors(7, 3) + " --do " + write_tensor("do.npy", {7, 3}, 4) +
                       " --mask causal --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"}) {
    ASSERT_TRUE(fs::exists(fs::path(out) / name)) << name;
  }
  const auto o = sparse_formats::read_npy<float>((fs::path(out) / "o.npy").string());
  EXPECT_EQ(o.shape, (std::vector<int64_t>{7, 3}));
  const auto lse = sparse_formats::read_npy<float>((fs::path(out) / "lse.npy").string());
  EXPECT_EQ(lse.shape, (std::vector<int64_t>{7}));
  // Row 0 of a causal mask attends only key 0: O_0 = V_0.
  const auto v = sparse_formats::read_npy<float>((dir_ / "v.npy").string());
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(o.data[static_cast<size_t>(c)], v.data[static_cast<size_t>(c)]);
}

TEST_F(CliTest, ScheduledAlgorithmsAgreeWithTheReferenceAndReportTheirIo) {
  const std::string args = tensors(33, 8) + " --do " + write_tensor("do.npy", {33, 8}, 4) + " --mask full";
  ASSERT_EQ(run(args + " --out " + (dir_ / "ref").string()).exit_code, 0);
  for (const char* algorithm : {"flash", "small_cache", "auto"}) {
    const std::string out = (dir_ / algorithm).string();
    const Result r = run(args + " --algorithm " + algorithm + " --cache-words 512 --io --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("counted (backward)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("peak resident"), std::string::npos) << r.output;
    for (const char* name : {"o.npy", "dq.npy", "dk.npy", "dv.npy"}) {
      const auto got = sparse_formats::read_npy<double>((fs::path(out) / name).string());
      const auto want = sparse_formats::read_npy<double>((dir_ / "ref" / name).string());
      ASSERT_EQ(got.data.size(), want.data.size());
      for (size_t i = 0; i < got.data.size(); ++i) EXPECT_NEAR(got.data[i], want.data[i], 1e-4) << name;
    }
  }
}

// float16 .npy inputs (NumPy's '<f2', written here byte by byte) are read exactly; --dtype runs the
// scheduled algorithms in float16 or bfloat16, within those types' rounding of the reference.
TEST_F(CliTest, AttentionReadsFloat16AndRunsIn16BitTypes) {
  auto write_half = [&](const std::string& name, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::string dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (33, 8), }";
    dict.append(64 - (10 + dict.size() + 1) % 64, ' ');
    dict += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += {static_cast<char>(dict.size() & 0xff), static_cast<char>(dict.size() >> 8)};
    bytes += dict;
    for (int i = 0; i < 33 * 8; ++i) {
      const uint16_t bits = spattn::to_half(uniform(rng)).bits;
      bytes += {static_cast<char>(bits & 0xff), static_cast<char>(bits >> 8)};
    }
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  };
  const std::string args = "attention --q " + write_half("q.npy", 1) + " --k " + write_half("k.npy", 2) + " --v " +
                           write_half("v.npy", 3) + " --do " + write_half("do.npy", 4) + " --mask causal";
  const Result reference = run(args + " --out " + (dir_ / "ref").string());
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  for (const auto& [dtype, tolerance] : {std::pair<std::string, double>{"float16", 4e-3}, {"bfloat16", 3e-2}}) {
    const std::string out = (dir_ / dtype).string();
    const Result r = run(args + " --dtype " + dtype + " --algorithm flash --io --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("lines of 32 words"), std::string::npos) << r.output;  // a 64-byte line of them
    for (const char* name : {"o.npy", "dq.npy", "dk.npy", "dv.npy"}) {
      const auto got = sparse_formats::read_npy<double>((fs::path(out) / name).string());
      const auto want = sparse_formats::read_npy<double>((dir_ / "ref" / name).string());
      ASSERT_EQ(got.data.size(), want.data.size());
      double worst = 0;
      for (size_t i = 0; i < got.data.size(); ++i) worst = std::max(worst, std::fabs(got.data[i] - want.data[i]));
      EXPECT_LE(worst, tolerance) << dtype << " " << name;
      EXPECT_GT(worst, 0.0) << dtype << " " << name << ": rounded to the type, not equal to the reference";
    }
  }
  const Result refused = run(args + " --dtype bfloat16 --out " + (dir_ / "no").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--dtype bfloat16: 16-bit tensors run the dense scheduled algorithms"),
            std::string::npos) << refused.output;
}

TEST_F(CliTest, FailuresLeaveTheOutputDirectoryUntouched) {
  const std::string out = (dir_ / "out").string();
  // A mask of the wrong shape is refused at its size line (the tensors set the shape): exit 1.
  std::ofstream(dir_ / "mask.mtx") << "%%MatrixMarket matrix coordinate pattern general\n5 5 1\n1 1\n";
  const Result r = run(tensors(7, 3) + " --mask " + (dir_ / "mask.mtx").string() + " --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--mask: " + (dir_ / "mask.mtx").string() + ":2: row count 5 does not match the expected 7"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".spattn-staging"), std::string::npos);
  }
}

TEST_F(CliTest, UsageErrorsExitTwoAndNameTheArgument) {
  Result r = run("attention --q x.npy");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--k"), std::string::npos) << r.output;
  r = run("plan --cache-words -5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--cache-words"), std::string::npos) << r.output;
  r = run("frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  r = run(tensors(4, 2) + " --mask 'sliding_window:w=-3' --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--mask"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-3"), std::string::npos) << r.output;
}

TEST_F(CliTest, UnreadableFileIsARuntimeErrorNamingTheFile) {
  const Result r = run("attention --q /nonexistent/q.npy --k k --v v --mask full --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("/nonexistent/q.npy"), std::string::npos) << r.output;
}

TEST_F(CliTest, PlanAndBoundPrintTheirParts) {
  Result r = run("plan --n 1024 --d 64 --cache-words 1024 --pass bwd");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("algorithm: small_cache"), std::string::npos) << r.output;
  r = run("plan --n 1024 --d 64 --cache-words 65536 --pass bwd");
  EXPECT_NE(r.output.find("algorithm: flash"), std::string::npos) << r.output;
  r = run("bound --n 1024 --d 64 --cache-words 1024");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Theorem 1.1"), std::string::npos) << r.output;
  r = run("plan --n 64 --d 64 --cache-words 100 --algorithm flash --pass bwd");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("387"), std::string::npos) << r.output;
}

// The counted lines predict a real cache's misses from M = 2 L^2 on, for every schedule; below it
// the plan says so, with the L it counts in.
TEST_F(CliTest, PlanMarksLinesBelowTwoLinesSquared) {
  const std::string below = "below 2 L^2 = ";
  for (const char* algorithm : {"small_cache", "flash"}) {
    const std::string plan = std::string("plan --n 512 --d 64 --pass fwd --algorithm ") + algorithm;
    Result r = run(plan + " --cache-words 511");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(below + "512 words: an LRU cache of 2M missed up to"), std::string::npos) << r.output;
    r = run(plan + " --cache-words 512");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("predicted lines of 16 words"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find(below), std::string::npos) << r.output;
  }
}

// --line-words sets the model every plan is made in: L = 1 is the paper's word model (lines are
// words; its own tiles, no line-sized runs), the tall-cache mark moves with 2 L^2, the bound is
// printed in lines of L with its domain, and L must be a power of two.
TEST_F(CliTest, PlanAndBoundTakeTheLineSize) {
  const std::string plan = "plan --n 512 --d 64 --pass bwd --mask random:p=0.05,seed=1 --objective words --cache-words 4096";
  Result r = run(plan + " -L 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("predicted lines of 1 words"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(" run 16"), std::string::npos) << r.output;
  r = run(plan + " --line-words 16");
  EXPECT_NE(r.output.find(" run 16"), std::string::npos) << r.output;
  r = run(plan + " --line-words 64");  // 2 L^2 = 8192 > M
  EXPECT_NE(r.output.find("below 2 L^2 = 8192 words"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("below 4 L"), std::string::npos) << r.output;  // d = 64: checked from 2 L^2
  // Rows of 1 to 3 lines agree with the simulator from 32 L^2 = 8192 words: below, said so, in
  // lines only (the word model is the paper's, not a cache's); rows under a line are not checked.
  r = run("plan --n 512 --d 16 --pass fwd --cache-words 4096 -L 16");
  EXPECT_NE(r.output.find("head_dim 16 below 4 L = 64 and M below 32 L^2 = 8192 words"), std::string::npos)
      << r.output;
  r = run("plan --n 512 --d 32 --pass fwd --cache-words 8192 -L 16");
  EXPECT_EQ(r.output.find("below 4 L"), std::string::npos) << r.output;
  r = run("plan --n 512 --d 16 --pass fwd --cache-words 4096 -L 1");
  EXPECT_EQ(r.output.find("below 4 L"), std::string::npos) << r.output;
  r = run("plan --n 512 --d 8 --pass fwd --cache-words 8192 -L 16");
  EXPECT_NE(r.output.find("head_dim 8 below L = 16: the lines counted here are not checked"), std::string::npos)
      << r.output;
  r = run("bound --n 1024 --d 64 --cache-words 256 -L 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("in lines of L = 16 words"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tall cache M >= 2 L^2 = 512: no"), std::string::npos) << r.output;
  for (const char* bad : {"3", "0", "2048", "x"}) {
    r = run(plan + " --line-words " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.output.find("--line-words"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("power of two"), std::string::npos) << r.output;
  }
}

// Under the time objective the plan prints the price's rates and where they come from; the
// environment (SPATTN_TIME_RATES) replaces the entries it names, and a bad entry stops the plan
// with its name and value.
TEST_F(CliTest, PlanPrintsTheTimeRatesAndTakesThemFromTheEnvironment) {
  const std::string plan = "plan --n 256 --d 32 --cache-words 8192 --mask random:p=0.05 --objective time --pass fwd";
  Result r = run(plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("time rates: built in for the "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" partial-tile pairs)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" walk steps)"), std::string::npos) << r.output;
  r = spattn_test::run_program("SPATTN_TIME_RATES=word=3,walk_step=0.5 " + std::string(SPATTN_CLI_PATH) + " " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("price in flash flops: 3 per word"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0.5 per walk step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("time rates: SPATTN_TIME_RATES=word=3,walk_step=0.5 (over the built in"), std::string::npos)
      << r.output;
  r = spattn_test::run_program("SPATTN_TIME_RATES=walk_step=-2 " + std::string(SPATTN_CLI_PATH) + " " + plan);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("walk_step = '-2' must be a finite number >= 0"), std::string::npos) << r.output;
}

// spattn plan --device cuda: the CUDA backend's kernels, tiles and M, planned without a GPU when
// the shared memory is given (an H200's 232448 bytes: the figures its runs reported).
TEST_F(CliTest, PlanForTheCudaBackend) {
  Result r = run("plan --device cuda --dtype bf16 --shared-memory-bytes 232448 --n 16384 --d 128 "
                 "--mask sliding_window:w=256");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cuda flash forward (tensor cores): M = 28416 words, 113664 bytes"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("cuda flash backward (tensor cores): M = 26880 words, 107520 bytes"), std::string::npos)
      << r.output;
  r = run("plan --device cuda --shared-memory-bytes 232448 --n 16384 --d 128 --pass fwd");  // fp32: the planner's tiles
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cuda flash forward: M = "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("tensor cores"), std::string::npos) << r.output;
  // Usage errors name the flag.
  r = run("plan --dtype bf16 --n 64 --d 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--device cuda"), std::string::npos) << r.output;
  r = run("plan --device cuda --shared-memory-bytes 232448 --cache-words 4096 --n 64 --d 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--cache-words"), std::string::npos) << r.output;
  r = run("plan --device gpu --n 64 --d 64");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--device"), std::string::npos) << r.output;
  // Without --shared-memory-bytes the current GPU's budget: none here is a runtime error saying why
  // (a machine with a GPU prints its plan).
  r = run("plan --device cuda --dtype fp16 --n 64 --d 64");
  if (r.exit_code != 0) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(r.output.find("no CUDA device") != std::string::npos ||
                r.output.find("built without CUDA") != std::string::npos)
        << r.output;
  }
}

// ---- Sparse inputs (Matrix Market Q, K, V) ------------------------------------------------------

namespace {

// All numbers "<prefix> N" in `text` (N an integer).
std::vector<long long> numbers_after(const std::string& text, const std::string& prefix) {
  std::vector<long long> found;
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    found.push_back(std::stoll(text.substr(at + prefix.size())));
  }
  return found;
}

// A rows x cols coordinate file with about `density` of the entries, and its nonzero count.
int64_t write_sparse(const fs::path& path, int64_t rows, int64_t cols, double density, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::bernoulli_distribution keep(density);
  std::ostringstream body;
  int64_t nnz = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      if (!keep(rng)) continue;
      body << r + 1 << ' ' << c + 1 << ' ' << uniform(rng) << '\n';
      ++nnz;
    }
  }
  std::ofstream(path) << "%%MatrixMarket matrix coordinate real general\n"
                      << rows << ' ' << cols << ' ' << nnz << '\n'
                      << body.str();
  return nnz;
}

}  // namespace

// Golden: q = [[1, 0], [0, 0]] (row 1 empty), k = diag(1, 2), v = I, full mask, scale 1:
// O = [[e, 1] / (e + 1), [1/2, 1/2]] (an empty query row is a zero query: uniform attention).
TEST_F(CliTest, SparseInputsGoldenCase) {
  std::ofstream(dir_ / "q.mtx") << "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n";
  std::ofstream(dir_ / "k.mtx") << "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 2\n";
  std::ofstream(dir_ / "v.mtx") << "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 1\n";
  const double e = std::exp(1.0);
  const std::vector<double> golden{e / (e + 1), 1 / (e + 1), 0.5, 0.5};
  for (const char* algorithm : {"reference", "flash", "small_cache"}) {
    const std::string out = (dir_ / algorithm).string();
    const Result r = run("attention --q " + (dir_ / "q.mtx").string() + " --k " + (dir_ / "k.mtx").string() +
                         " --v " + (dir_ / "v.mtx").string() + " --mask full --scale 1 --cache-words 64 --algorithm " +
                         algorithm + " --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Z_input = (nnz(Q) + nnz(K)) / 2 = 1.5"), std::string::npos) << r.output;
    const auto o = sparse_formats::read_npy<double>((fs::path(out) / "o.npy").string());
    ASSERT_EQ(o.data.size(), golden.size());
    for (size_t i = 0; i < golden.size(); ++i) EXPECT_NEAR(o.data[i], golden[i], 1e-6) << algorithm << " o[" << i << "]";
  }
}

TEST_F(CliTest, SparseInputsAgreeWithTheReferenceAndCountWhatThePlanPredicts) {
  const int64_t nnz_q = write_sparse(dir_ / "q.mtx", 37, 8, 0.3, 1);
  const int64_t nnz_k = write_sparse(dir_ / "k.mtx", 37, 8, 0.3, 2);
  write_sparse(dir_ / "v.mtx", 37, 8, 0.5, 3);
  const std::string args = "attention --q " + (dir_ / "q.mtx").string() + " --k " + (dir_ / "k.mtx").string() +
                           " --v " + (dir_ / "v.mtx").string() + " --do " + write_tensor("do.npy", {37, 8}, 4) +
                           " --mask causal";
  ASSERT_EQ(run(args + " --out " + (dir_ / "ref").string()).exit_code, 0);
  std::ostringstream z_input;
  z_input << "Z_input = (nnz(Q) + nnz(K)) / 2 = " << 0.5 * static_cast<double>(nnz_q + nnz_k);
  for (const char* algorithm : {"flash", "small_cache", "auto"}) {
    const std::string out = (dir_ / algorithm).string();
    const Result r = run(args + " --algorithm " + algorithm + " --cache-words 256 --io --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(z_input.str()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Q        index"), std::string::npos) << r.output;  // CSR index words counted
    // Forward and backward: the plan's predicted words == the ledger's counted words.
    const auto predicted = numbers_after(r.output, "predicted I/O: ");
    const auto counted = numbers_after(r.output, "I/O (reads + writes): ");
    ASSERT_EQ(predicted.size(), 2u) << r.output;
    EXPECT_EQ(predicted, counted) << r.output;
    for (const char* name : {"o.npy", "dq.npy", "dk.npy", "dv.npy"}) {
      const auto got = sparse_formats::read_npy<double>((fs::path(out) / name).string());
      const auto want = sparse_formats::read_npy<double>((dir_ / "ref" / name).string());
      ASSERT_EQ(got.data.size(), want.data.size());
      for (size_t i = 0; i < got.data.size(); ++i) EXPECT_NEAR(got.data[i], want.data[i], 1e-4) << name;
    }
  }
  // plan and bound read the same files and report the same Z_input.
  Result r = run("plan --q " + (dir_ / "q.mtx").string() + " --k " + (dir_ / "k.mtx").string() +
                 " --mask causal --cache-words 256 --pass fwd");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(z_input.str()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("seqlen_q 37, seqlen_k 37, head_dim 8"), std::string::npos) << r.output;
  r = run("bound --q " + (dir_ / "q.mtx").string() + " --k " + (dir_ / "k.mtx").string() + " --cache-words 256");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ostringstream bound_z;
  bound_z << "Z_input = (nnz(Q) + nnz(K)) / 2: " << 0.5 * static_cast<double>(nnz_q + nnz_k);
  EXPECT_NE(r.output.find(bound_z.str()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Z_QK (attended pairs): 1369"), std::string::npos) << r.output;  // full: 37^2
}

TEST_F(CliTest, SparseInputErrorsNameTheArgument) {
  write_sparse(dir_ / "q.mtx", 7, 4, 0.5, 1);
  write_sparse(dir_ / "k3.mtx", 7, 3, 0.5, 2);
  std::ofstream(dir_ / "bad.mtx") << "%%MatrixMarket matrix coordinate real general\n7 4 1\n9 1 1.0\n";
  const std::string q = " --q " + (dir_ / "q.mtx").string();
  // K's head_dim differs from Q's: a usage error (exit 2) before anything is densified, naming both.
  Result r = run("attention" + q + " --k " + (dir_ / "k3.mtx").string() + " --v " + (dir_ / "q.mtx").string() +
                 " --mask full --algorithm flash --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--k has head_dim 3, --q has 4"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "o"));
  // A malformed file: the flag, the file and the line.
  r = run("attention --q " + (dir_ / "bad.mtx").string() + " --k " + (dir_ / "q.mtx").string() + " --v " +
          (dir_ / "q.mtx").string() + " --mask full --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--q: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.mtx:3"), std::string::npos) << r.output;
  // Matrix Market inputs are one head: a rank-4 tensor beside them is a usage error.
  r = run("attention" + q + " --k " + write_tensor("k4.npy", {1, 1, 7, 4}, 5) + " --v " + (dir_ / "q.mtx").string() +
          " --mask full --algorithm flash --out " + (dir_ / "o").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // plan: an explicit shape flag that contradicts the file.
  r = run("plan" + q + " --n 9 --cache-words 256");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--n = 9 disagrees with --q, whose file gives 7"), std::string::npos) << r.output;
}
