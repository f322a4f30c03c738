// spattn_bench: how fast the native schedules run, next to this machine's sgemm (docs/results.md).
//
//   spattn_bench                               the full table: 7 masks x n {1024, 4096, 16384}
//                                              x d {64, 128} x {flash, small_cache, auto}
//                                              (small_cache up to n 4096: --small-cache-max-n)
//   spattn_bench --n 4096 --d 64 --masks full,window --algorithms flash --threads 2
//   spattn_bench --cache-words 12288,131072    each case at several fast-memory sizes, one after
//                                              the other (compare M within one run)
//   spattn_bench --csv results.csv             also write the rows as CSV
//   spattn_bench --window-target --reps 11     the window target as one run's ratio: full and
//                                              window take turns at n 4096, d 64 and 128 (flash)
//   spattn_bench --memory                      peak RSS of fwd+bwd at n 65536 and 131072, window 256
//   spattn_bench --memory --memory-mask causal --memory-n 131072   the same over any PATTERN-SPEC
//   spattn_bench --memory --schedule-only      the same through the flash schedule alone
#include "memory_mode.hpp"
#include "roofline.hpp"
#include "speed_cases.hpp"
#include "speed_report.hpp"

#include <spattn/io.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>
#include <spattn/version.hpp>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace spattn;
using namespace spattn::bench;

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d", std::gmtime(&now));
  return buffer;
}

// Whether `algorithm` runs small_cache in either pass (auto asks the planner).
bool runs_small_cache(Algorithm algorithm, const Mask& mask, int64_t n, int64_t d,
                      const RunSettings& settings) {
  if (algorithm != Algorithm::automatic) return algorithm == Algorithm::small_cache;
  const bounds::DenseShape shape{n, n, d, d};
  HeadPlanOptions planning;
  planning.cache_words = settings.cache_words == 0 ? default_cache_words() : settings.cache_words;
  planning.algorithm = algorithm;
  planning.num_heads = settings.heads;
  planning.line_words = settings.line_words;
  for (const Pass pass : {Pass::forward, Pass::backward}) {
    if (plan_heads(shape, mask, pass, planning).algorithm == Algorithm::small_cache) return true;
  }
  return false;
}

// --window-target: the full and window masks of each (n, d) in one run_case call, so that their
// repetitions take turns and window / (full x density) compares times taken under the same load
// (as separate cases they run minutes apart, and the shared machine's load drifts in between).
void run_window_target(const std::vector<int64_t>& seqlens, const std::vector<int64_t>& head_dims,
                       const std::vector<Algorithm>& algorithms,
                       const std::vector<int64_t>& cache_words_list, const RunSettings& settings,
                       const std::string& csv_path) {
  const MaskChoice full = parse_mask_choice("full");
  const MaskChoice window = parse_mask_choice("window");
  std::vector<WindowRatio> ratios;
  std::cout << "\n";
  print_table_header(std::cout, std::nullopt);
  for (const int64_t n : seqlens) {
    const Mask full_mask = Mask::from_spec(full.spec, n, n);
    const Mask window_mask = Mask::from_spec(window.spec, n, n);
    for (const int64_t d : head_dims) {
      SpeedProblem problem(settings.heads, n, d, 1);
      std::vector<CaseSlot> slots;  // (full, window) for each algorithm and M, pairs in order
      for (const Algorithm algorithm : algorithms) {
        for (const int64_t cache_words : cache_words_list) {
          slots.push_back({full, full_mask, algorithm, cache_words});
          slots.push_back({window, window_mask, algorithm, cache_words});
        }
      }
      const std::vector<CaseResult> results = run_case(problem, slots, settings);
      for (const CaseResult& result : results) print_table_row(std::cout, result, std::nullopt);
      for (size_t i = 0; i + 1 < results.size(); i += 2) {
        ratios.push_back(window_ratio(results[i], results[i + 1]));
      }
    }
  }
  print_window_targets(std::cout, ratios);
  if (!csv_path.empty()) write_window_csv(csv_path, ratios);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spattn_bench: speed of the native attention schedules, with the sgemm roofline"};
  std::vector<int64_t> seqlens = {1024, 4096, 16384};
  std::vector<int64_t> head_dims = {64, 128};
  std::vector<std::string> mask_names;
  for (const MaskChoice& choice : standard_masks()) mask_names.push_back(choice.name);
  std::vector<std::string> algorithm_names = {"flash", "small_cache", "auto"};
  RunSettings settings;
  std::vector<int64_t> cache_words_list = {0};
  std::string csv_path;
  bool memory = false;
  MemorySettings memory_settings;
  int sgemm_size = 2048;
  int64_t small_cache_max_n = 4096;
  bool no_sgemm = false;
  bool window_target = false;
  app.add_option("--n", seqlens, "sequence lengths (seqlen_q = seqlen_k)")->delimiter(',');
  app.add_option("--d", head_dims, "head dims")->delimiter(',');
  CLI::Option* masks_option = app.add_option("--masks", mask_names,
                 "masks: full, causal, window, bigbird, documents, random, random_blocks, or any "
                 "PATTERN-SPEC, comma-separated (a spec's own parameters may follow their commas: "
                 "dilated_window:w=64,dilation=4,causal is two masks)");
  app.add_option("--algorithms", algorithm_names, "flash, small_cache, auto")->delimiter(',');
  app.add_option("--threads", settings.threads, "worker threads (0 = hardware concurrency)");
  app.add_option("--reps", settings.repetitions, "timed repetitions per case (median reported)");
  app.add_option("--max-seconds", settings.max_seconds, "stop repeating a case after this long (per algorithm and M)");
  app.add_option("--min-seconds", settings.min_seconds,
                 "repeat past --reps until a case has run this long (per algorithm and M; at most 1000 "
                 "repetitions), so that short cases get a stable median")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--cache-words", cache_words_list,
                 "fast-memory sizes M, each case run at each (0 = the default, "
                 "spattn::default_cache_words())")->delimiter(',');
  app.add_option("--heads", settings.heads, "heads (batch 1)");
  app.add_option("--line-words,-L", settings.line_words,
                 "line size L of the I/O model in words (0 = 16): the tiles and the counted lines follow it")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              const long long value = std::stoll(text);
              if (value == 0 || io::is_plan_line_words(value)) return "";
            } catch (const std::exception&) {
            }
            return "must be 0 or a power of two from 1 to " + std::to_string(io::kMaxLineWords) + ", got " + text;
          },
          "0 OR A POWER OF TWO"));
  app.add_option("--csv", csv_path, "also write the rows to this CSV file");
  app.add_option("--sgemm-size", sgemm_size, "size of the roofline sgemm (n x n x n)");
  app.add_flag("--no-sgemm", no_sgemm, "skip the sgemm roofline");
  app.add_option("--small-cache-max-n", small_cache_max_n,
                 "skip small_cache above this n (it materializes n x n intermediates for a full mask)");
  CLI::Option* memory_option =
      app.add_flag("--memory", memory, "peak RSS of flash fwd+bwd over a mask (a sliding window) at long n");
  app.add_option("--memory-n", memory_settings.seqlens, "sequence lengths of --memory")->delimiter(',');
  CLI::Option* memory_window =
      app.add_option("--memory-window", memory_settings.window, "window half-width of --memory");
  app.add_option("--memory-mask", memory_settings.mask_spec,
                 "the PATTERN-SPEC of --memory (default sliding_window:w=<--memory-window>)")
      ->excludes(memory_window);
  app.add_flag("--schedule-only", memory_settings.schedule_only,
               "with --memory: run the flash schedule directly (no planner), not the public API");
  app.add_flag("--window-target", window_target,
               "the window target (window <= 1.3 x full x density, fwd+bwd) as a ratio measured "
               "in one run: full and window take turns in every repetition; --n defaults to 4096, "
               "--algorithms to flash; no sgemm")
      ->excludes(masks_option)
      ->excludes(memory_option);
  CLI11_PARSE(app, argc, argv);
  if (window_target) {  // the target is stated at n 4096 for flash
    if (app.count("--n") == 0) seqlens = {4096};
    if (app.count("--algorithms") == 0) algorithm_names = {"flash"};
  }

  try {
    const int threads = resolved_threads(settings.threads);
    settings.cache_words = cache_words_list.empty() ? 0 : cache_words_list.front();
    std::cout << "spattn_bench " << version() << " | " << cpu_model() << " | "
              << std::thread::hardware_concurrency() << " hardware threads | " << today() << "\n"
              << "threads " << threads << ", M (words) =";
    for (const int64_t m : cache_words_list) std::cout << ' ' << (m == 0 ? default_cache_words() : m);
    std::cout << " (default " << default_cache_words() << "), heads " << settings.heads << "\n";
    if (memory) {
      memory_settings.threads = settings.threads;
      memory_settings.cache_words = settings.cache_words;
      memory_settings.line_words = settings.line_words;
      run_memory_mode(std::cout, memory_settings);
      return 0;
    }
    std::vector<Algorithm> algorithms;
    for (const std::string& name : algorithm_names) algorithms.push_back(parse_algorithm(name));
    if (window_target) {
      run_window_target(seqlens, head_dims, algorithms, cache_words_list, settings, csv_path);
      return 0;
    }

    std::optional<Roofline> roofline;
    if (!no_sgemm) {
      roofline = measure_sgemm(sgemm_size, 3, threads);
      if (roofline) {
        std::printf("sgemm (OpenBLAS, %s kernels) %d^3 on %d threads: %.1f GFLOP/s (best of 3: %.1f ms)\n",
                    roofline->core.empty() ? "unknown" : roofline->core.c_str(), roofline->size,
                    threads, roofline->gflops, 1e3 * roofline->seconds);
      } else {
        std::cout << "sgemm roofline: missing (built without OpenBLAS; install libopenblas-dev)\n";
      }
    }
    std::cout << "GFLOP/s count attended pairs only: forward 4 |Omega| d, backward 10 |Omega| d\n\n";

    std::vector<CaseResult> results;
    print_table_header(std::cout, roofline);
    for (const int64_t n : seqlens) {
      for (const std::string& name : split_mask_list(mask_names)) {
        const MaskChoice choice = parse_mask_choice(name);
        const Mask mask = Mask::from_spec(choice.spec, n, n);
        for (const int64_t d : head_dims) {
          SpeedProblem problem(settings.heads, n, d, 1);
          // Every algorithm at every M, taking turns within each repetition (run_case).
          std::vector<CaseSlot> slots;
          for (const Algorithm algorithm : algorithms) {
            for (const int64_t cache_words : cache_words_list) {
              RunSettings at = settings;
              at.cache_words = cache_words;
              if (n > small_cache_max_n && runs_small_cache(algorithm, mask, n, d, at)) {
                std::printf("%-14s %6lld %4lld %-22s %7lld skipped: runs small_cache, n > --small-cache-max-n %lld\n",
                            choice.name.c_str(), static_cast<long long>(n), static_cast<long long>(d),
                            algorithm_name(algorithm),
                            static_cast<long long>(cache_words == 0 ? default_cache_words() : cache_words),
                            static_cast<long long>(small_cache_max_n));
                continue;
              }
              slots.push_back({choice, mask, algorithm, cache_words});
            }
          }
          for (const CaseResult& result : run_case(problem, slots, settings)) {
            results.push_back(result);
            print_table_row(std::cout, result, roofline);
          }
        }
      }
    }
    print_targets(std::cout, results, roofline);
    if (!csv_path.empty()) write_csv(csv_path, results, roofline);
  } catch (const std::exception& error) {
    std::cerr << "spattn_bench: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
