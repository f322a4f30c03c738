// spattn run: the main job. With no arguments it runs the embedded default: a suite of masks (full,
// causal, sliding window, dilated, Longformer, BigBird, packed documents, random 5%) at n = 2048,
// d = 64, over cache sizes M that span every mask's crossover (d^2/8, d^2, 8 d^2, 32 d^2). Each
// (mask, M) runs the planner's choice counted, forward and backward, through the public API; the
// counted reads and writes must equal the plan's exactly (else it stops), and the outputs are
// compared with the fp64 reference (computed once per mask). Then the planner's switch M per mask,
// and a summary of what the table shows.
#include "axes.hpp"
#include "cli_support.hpp"
#include "commands.hpp"
#include "measure.hpp"
#include "plot.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <spattn/error.hpp>
#include <spattn/io.hpp>
#include <spattn/plan.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

namespace spattn::cli {

namespace {

struct RunFlags {
  int64_t n = 2048;
  int64_t d = 64;
  std::string cache_words;  // an axis; default d^2/8, d^2, 8 d^2, 32 d^2
  std::string line_words = "1,16";  // the models: the paper's words and 64-byte lines of fp32
  std::vector<std::string> masks;  // empty: the suite at this n (default_suite)
  std::string algorithm = "auto";
  uint64_t seed = 1;
  std::string csv, json, plot;
};

// Per mask and line size: the planner's backward switch M and the bound's crossover.
struct Crossover {
  std::string pattern;
  std::vector<int64_t> switches;  // every backward switch, ascending; empty: none in range
  double theory = 0.0;
  bool masked = false;
};

// The embedded suite: one mask of each family the paper's users asked about. The documents are
// packed at a quarter, a half and two eighths of n, so the suite works at any n.
std::vector<std::string> default_suite(int64_t n) {
  const std::string documents =
      n >= 8 ? "documents:lengths=" + std::to_string(n / 4) + "/" + std::to_string(n / 2) + "/" + std::to_string(n / 8) +
                   "/" + std::to_string(n - n / 4 - n / 2 - n / 8) + ",causal=1"
             : "documents:num_docs=2,causal=1";
  return {"full",
          "causal",
          "sliding_window:w=128",
          "dilated_window:w=64,dilation=4",
          "global_window:w=128,g=16",
          "bigbird:block=64,w=1,g=1,r=3,seed=7",
          documents,
          "random:p=0.05,seed=1"};
}

std::vector<int64_t> default_cache_words(int64_t d) {
  const int64_t d2 = d * d;
  return {std::max<int64_t>(d2 / 8, 16), d2, 8 * d2, 32 * d2};
}

// Powers of two around the grid that are not in it: predictions that make the plot's lines smooth.
std::vector<int64_t> curve_cache_words(const std::vector<int64_t>& grid) {
  const auto [low, high] = std::minmax_element(grid.begin(), grid.end());
  std::vector<int64_t> extra;
  for (int64_t m = 16; m <= 2 * *high; m *= 2) {
    if (m >= *low / 8 && std::find(grid.begin(), grid.end(), m) == grid.end()) extra.push_back(m);
  }
  return extra;
}

std::string times(double x) { return format_real(x, 2) + "x"; }

// Where the bound's branches meet: "8188 (Z_input^2/Z_QK)" or "4096 (d^2)".
std::string theory_text(const Crossover& c) {
  return format_count(std::llround(c.theory)) + (c.masked ? " (Z_input^2/Z_QK)" : " (d^2)");
}

// Every switch M over the theory's M ("0.79, 1.6"), or "-" when there is none or no theory.
std::string switch_ratios(const Crossover& c) {
  if (c.switches.empty() || c.theory <= 0) return "-";
  std::string text;
  for (size_t i = 0; i < c.switches.size(); ++i) {
    text += (i ? ", " : "") + format_real(static_cast<double>(c.switches[i]) / c.theory, 2);
  }
  return text;
}

// One model's rows and switches: every mask at every M, counted in lines of line_words words.
struct ModelRun {
  int64_t line_words = 0;
  std::vector<Row> rows, curves;
  std::vector<Crossover> crossovers;
};

std::string model_name(int64_t line_words) {
  return line_words == 1 ? "the paper's word model (L = 1: one word moves at a time)"
                         : "lines of L = " + std::to_string(line_words) + " words (" +
                               std::to_string(4 * line_words) + " bytes of fp32)";
}

void print_summary(const std::vector<Row>& rows, const std::vector<Crossover>& crossovers, const RunFlags& flags,
                   size_t num_cache_sizes) {
  double worst_error = 0.0, worst_tolerance = 0.0;
  for (const Row& row : rows) {
    worst_error = std::max(worst_error, row.max_error.value_or(0.0));
    worst_tolerance = std::max(worst_tolerance, row.error_to_tolerance.value_or(0.0));
  }
  std::cout << "Summary\n"
            << "- Exact: all " << rows.size() << " counted runs (" << flags.masks.size() << " masks x "
            << num_cache_sizes << " cache sizes, forward + backward) moved exactly the reads and writes the "
            << "planner predicted.\n"
            << "- Correct: largest error against the fp64 reference " << format_real(worst_error, 2) << ", "
            << format_real(100.0 * worst_tolerance, 2) << "% of the fp32 tolerance.\n";

  // Per mask: the switch, where theory puts it, and the range of I/O / bound over the cache sizes.
  const double d2 = static_cast<double>(flags.d * flags.d);
  Table table({"  mask", "switch M (backward; every one)", "bound branches meet", "switch / theory", "I/O / bound"});
  std::vector<std::string> below;
  for (const Crossover& c : crossovers) {
    double lowest = INFINITY, highest = 0.0;
    for (const Row& row : rows) {
      if (row.pattern != c.pattern) continue;
      lowest = std::min(lowest, row.ratio_to_bound);
      highest = std::max(highest, row.ratio_to_bound);
    }
    if (c.masked && lowest < 1.0) below.push_back(c.pattern);
    // Every switch: a density-adaptive cost can cross flash's more than once.
    std::string found = c.switches.empty() ? "none in range" : "";
    for (size_t i = 0; i < c.switches.size(); ++i) {
      const double m = static_cast<double>(c.switches[i]);
      found += (i ? ", " : "") + std::to_string(c.switches[i]) + (c.masked ? "" : " = " + format_real(m / d2, 2) + " d^2");
    }
    table.add_row({"  " + c.pattern, found, theory_text(c), switch_ratios(c),
                   times(lowest) + " to " + times(highest)});
  }
  std::cout << "- Per mask: every M at which the planner's choice changes (flash above the last one), where the "
               "bound's branches\n  meet, and the I/O of the planner's choice over the bound (constant 1; dense or "
               "worst-case sparse):\n"
            << table.render();

  // Against flash: the largest saving of the planner's choice.
  const Row* best = nullptr;
  for (const Row& row : rows) {
    if (row.ratio_to_flash && (best == nullptr || *row.ratio_to_flash < *best->ratio_to_flash)) best = &row;
  }
  if (best != nullptr && *best->ratio_to_flash < 1.0) {
    std::cout << "- Against flash: the planner's choice moves up to " << times(1.0 / *best->ratio_to_flash)
              << " fewer words than flash (" << best->pattern << " at M = " << best->cache_words
              << "); above each mask's switch the choice is flash itself.\n";
  }
  if (below.empty()) {
    std::cout << "- No mask moves fewer words than the worst-case sparse bound at these M.";
  } else {
    std::string list;
    for (size_t i = 0; i < below.size(); ++i) list += (i ? ", " : "") + below[i];
    std::cout << "- Below the worst-case sparse bound at some M (structured masks may be, as theory allows): " << list
              << ".";
  }
  std::cout << "\n";
}

// Per mask, the last switch (flash's from there up) over the theory's M in each model.
void print_models_side_by_side(const std::vector<ModelRun>& models) {
  std::vector<std::string> header{"  mask", "theory M"};
  for (const ModelRun& model : models) header.push_back("switch / theory, L = " + std::to_string(model.line_words));
  Table table(header);
  for (size_t i = 0; i < models.front().crossovers.size(); ++i) {
    const Crossover& first = models.front().crossovers[i];
    std::vector<std::string> row{"  " + first.pattern, theory_text(first)};
    for (const ModelRun& model : models) row.push_back(switch_ratios(model.crossovers[i]));
    table.add_row(row);
  }
  std::cout << "\nBoth models: where the planner's choice changes (backward), as multiples of where the bound's "
               "branches meet.\nThe paper's claim is made in the word model (L = 1); lines price what a CPU cache "
               "moves.\n"
            << table.render();
}

void run_main_job(RunFlags flags) {
  if (flags.n < 1) throw UsageError("--n: must be >= 1, got " + std::to_string(flags.n));
  if (flags.d < 1) throw UsageError("--d: must be >= 1, got " + std::to_string(flags.d));
  check_problem_size(flags.n, flags.d);
  if (flags.masks.empty()) flags.masks = default_suite(flags.n);
  const std::vector<int64_t> grid = flags.cache_words.empty() ? default_cache_words(flags.d)
                                                              : parse_int_axis(flags.cache_words, "--cache-words", 1);
  const auto algorithms = parse_name_axis(flags.algorithm, "--algorithm", {"auto", "flash", "small_cache"});
  if (algorithms.size() != 1) throw UsageError("--algorithm: give one of auto, flash, small_cache (spattn sweep takes lists)");
  const Algorithm requested = parse_algorithm(algorithms.front());
  if (!flags.plot.empty()) {
    if (flags.masks.size() > kMaxPlotPanels) {
      throw UsageError("--plot: " + std::to_string(flags.masks.size()) + " masks; at most " +
                       std::to_string(kMaxPlotPanels) + " panels fit in one figure");
    }
    if (flags.plot == "-") throw UsageError("--plot: needs a file name (a PNG cannot go to stdout)");
    require_gnuplot("--plot");
    check_writable(flags.plot, "--plot");
  }
  for (const auto& [path, flag] : {std::pair<std::string, const char*>{flags.csv, "--csv"}, {flags.json, "--json"}}) {
    if (path == "-") throw UsageError(std::string(flag) + ": spattn run writes files only ('-' is for spattn sweep)");
    if (!path.empty()) check_writable(path, flag);
  }
  const std::vector<int64_t> curve_grid = flags.plot.empty() ? std::vector<int64_t>{} : curve_cache_words(grid);
  std::vector<ModelRun> models;
  for (int64_t line_words : parse_int_axis(flags.line_words, "--line-words", 1)) {
    if (!io::is_plan_line_words(line_words)) {
      throw UsageError("--line-words: " + std::to_string(line_words) + " is not a power of two from 1 to " +
                       std::to_string(io::kMaxLineWords));
    }
    models.push_back({line_words, {}, {}, {}});
  }

  const auto start = std::chrono::steady_clock::now();
  Progress progress(static_cast<int>(flags.masks.size() *
                                     (1 + models.size() * (grid.size() + 1 + (flags.plot.empty() ? 0 : 1)))));
  const Problem problem(flags.n, flags.d, flags.seed);
  std::vector<Mask> masks;  // all built first: a bad spec or file stops the run before any work
  for (const std::string& spec : flags.masks) masks.push_back(load_prepared_mask(spec, flags.n, flags.n, "--mask"));
  for (size_t index = 0; index < masks.size(); ++index) {
    const std::string& spec = flags.masks[index];
    const Mask& mask = masks[index];
    progress.step(spec + ": fp64 reference");
    const Reference reference = compute_reference(problem, mask, true, true);
    for (ModelRun& model : models) {
      const std::string at = spec + ", L = " + std::to_string(model.line_words);
      const size_t first = model.rows.size();
      for (int64_t m : grid) {
        progress.step(at + ": M = " + std::to_string(m));
        const RowRequest request{spec, m, model.line_words, requested, PassSet::both, false};
        Row row = measure_row(problem, mask, request, &reference);
        if (!row.feasible()) throw RuntimeError("--cache-words: " + row.note);
        model.rows.push_back(std::move(row));
      }
      progress.step(at + ": the planner's switch M");
      const std::vector<int64_t> switches =
          add_switch(model.rows, first, problem, mask, grid[grid.size() / 2], model.line_words);
      model.crossovers.push_back({spec, switches, model.rows[first].bound_crossover, model.rows[first].masked});
      if (!curve_grid.empty()) {
        progress.step(at + ": predictions for the plot");
        for (int64_t m : curve_grid) {
          model.curves.push_back(
              measure_row(problem, mask, {spec, m, model.line_words, requested, PassSet::both, true}, nullptr));
        }
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "spattn run: n = " << flags.n << ", d = " << flags.d << ", forward + backward, algorithm "
            << flags.algorithm << ", counted (reads and writes checked against the planner's exact prediction)\n"
            << "bound: the paper's, constant 1 (dense: Saha-Ye forward + Theorem 1.1 backward; masks: the sparse "
               "bound, a worst case over masks);\n"
            << "max err: against the fp64 reference, over O, LSE, dQ, dK, dV; plan ms: plan_attention (both "
               "passes); fwd / bwd ms: the counted API calls, one thread\n";
  std::vector<Row> rows;  // every model's, for the files
  for (const ModelRun& model : models) {
    std::cout << "\n== In " << model_name(model.line_words) << ": tiles, choices and switches made for it ==\n\n"
              << rows_table(model.rows, true) << '\n';
    print_summary(model.rows, model.crossovers, flags, grid.size());
    rows.insert(rows.end(), model.rows.begin(), model.rows.end());
  }
  if (models.size() > 1) print_models_side_by_side(models);
  std::cout << "- Took " << format_real(seconds, 3) << " s.\n";

  if (!flags.csv.empty()) write_file_atomically(flags.csv, rows_csv(rows), "--csv");
  if (!flags.json.empty()) write_file_atomically(flags.json, rows_json(rows, "run"), "--json");
  if (!flags.plot.empty()) {
    const ModelRun& drawn = models.back();
    plot_io(drawn.rows, drawn.curves,
            "spattn run: I/O against M, n = " + std::to_string(flags.n) + ", d = " + std::to_string(flags.d) +
                ", L = " + std::to_string(drawn.line_words) + " (lines: exact predictions; points: counted runs)",
            flags.plot, "--plot");
  }
  size_t failed = 0;
  for (const Row& row : rows) failed += row.error_to_tolerance.value_or(0.0) > 1.0 ? 1 : 0;
  if (failed > 0) {
    throw RuntimeError("run: " + std::to_string(failed) + " rows differ from the fp64 reference by more than the "
                       "fp32 tolerance (see the max err column)");
  }
}

}  // namespace

void register_run(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand(
      "run", "The main job: a suite of masks across cache sizes that span the crossover, counted and checked");
  cmd->add_option("--n", flags->n, "Sequence length")->capture_default_str();
  cmd->add_option("--d", flags->d, "Head dimension")->capture_default_str();
  cmd->add_option("--cache-words,-M", flags->cache_words,
                  "Cache sizes M in words: a list or range such as 512,4096 or 256:65536:x4 "
                  "(default d^2/8, d^2, 8 d^2, 32 d^2)");
  std::string suite;
  for (const std::string& spec : default_suite(2048)) suite += (suite.empty() ? "" : "; ") + spec;
  cmd->add_option("--mask", flags->masks,
                  "Masks of the suite: PATTERN-SPECs or .mtx files (repeat the flag); default, at n = 2048: " + suite);
  cmd->add_option("--algorithm", flags->algorithm, "auto, flash or small_cache")->capture_default_str();
  cmd->add_option("--line-words,-L", flags->line_words,
                  "Line sizes L of the I/O model, in words, one section each: 1 is the paper's word model, 16 a "
                  "64-byte line of fp32 (--plot draws the last)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_option("--csv", flags->csv, "Also write the rows as CSV to FILE");
  cmd->add_option("--json", flags->json, "Also write the rows and their context as JSON to FILE");
  cmd->add_option("--plot", flags->plot, "Draw I/O against M (one panel per mask) into FILE.png (needs gnuplot)");
  cmd->callback([flags] { run_main_job(*flags); });
}

}  // namespace spattn::cli
