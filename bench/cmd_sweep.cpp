// spattn sweep: every combination of the axes, one row each.
//   spattn sweep --n 1024,4096 --d 64 --cache-words 64:65536:x2 --mask causal --mask full
//                --algorithm auto,flash,small_cache --pass both [--predict-only] [--no-validate]
//                [--switch] [--csv FILE] [--json FILE] [--plot FILE.png]
// Rows run counted through the public API (counted == predicted is checked) and are compared with
// the fp64 reference (computed once per mask, n and d) unless --no-validate; --predict-only fills
// them from the planner's exact prediction without running. A requested algorithm that does not fit
// in M gives an "infeasible" row; a sweep in which nothing fits is an error.
#include "axes.hpp"
#include "cli_support.hpp"
#include "commands.hpp"
#include "measure.hpp"
#include "plot.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <spattn/io.hpp>
#include <spattn/error.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <set>

namespace spattn::cli {

namespace {

struct SweepFlags {
  std::string n = "1024";
  std::string d = "64";
  std::string cache_words = "256:65536:x4";
  int64_t line_words = io::kDefaultLineWords;
  std::vector<std::string> masks = {"full"};
  std::string algorithm = "auto";
  std::string pass = "both";
  uint64_t seed = 1;
  bool no_validate = false;
  bool predict_only = false;
  bool search_switch = false;
  std::string csv, json, plot;
};

// At most this many rows: a typo in a range must not start a day-long sweep.
constexpr int64_t kMaxRows = 100000;

struct Axes {
  std::vector<int64_t> n, d, cache_words;
  std::vector<Algorithm> algorithms;
  std::vector<PassSet> passes;
};

Axes parse_axes(const SweepFlags& flags) {
  Axes axes;
  axes.n = parse_int_axis(flags.n, "--n", 1);
  axes.d = parse_int_axis(flags.d, "--d", 1);
  axes.cache_words = parse_int_axis(flags.cache_words, "--cache-words", 1);
  for (const auto& name : parse_name_axis(flags.algorithm, "--algorithm", {"auto", "flash", "small_cache"})) {
    axes.algorithms.push_back(parse_algorithm(name));
  }
  for (const auto& name : parse_name_axis(flags.pass, "--pass", {"fwd", "bwd", "both"})) {
    axes.passes.push_back(parse_pass_set(name));
  }
  if (flags.masks.empty()) throw UsageError("--mask: no masks given");
  for (int64_t n : axes.n) {
    for (int64_t d : axes.d) check_problem_size(n, d);
  }
  const double rows = static_cast<double>(axes.n.size()) * static_cast<double>(axes.d.size()) *
                      static_cast<double>(flags.masks.size()) * static_cast<double>(axes.cache_words.size()) *
                      static_cast<double>(axes.algorithms.size()) * static_cast<double>(axes.passes.size());
  if (rows > static_cast<double>(kMaxRows)) {
    throw UsageError("sweep: " + format_real(rows, 4) + " combinations; at most " + std::to_string(kMaxRows) +
                     " rows per sweep");
  }
  return axes;
}

void print_footer(const std::vector<Row>& rows, bool validated) {
  size_t counted = 0, predicted = 0, infeasible = 0;
  double worst_error = 0.0, worst_ratio = 0.0;
  std::set<std::string> notes;
  for (const Row& row : rows) {
    counted += row.source == "counted" ? 1 : 0;
    predicted += row.source == "predicted" ? 1 : 0;
    if (!row.feasible()) {
      ++infeasible;
      notes.insert(row.pattern + ": " + row.note.substr(0, row.note.find("; got M =")));  // one per minimum, not per M
    }
    worst_error = std::max(worst_error, row.max_error.value_or(0.0));
    worst_ratio = std::max(worst_ratio, row.error_to_tolerance.value_or(0.0));
  }
  std::cout << '\n' << rows.size() << " rows: " << counted << " counted"
            << (counted > 0 ? " (each equal to its exact prediction, checked)" : "") << ", " << predicted
            << " predicted (not run), " << infeasible << " infeasible.\n";
  if (validated && counted > 0) {
    std::cout << "Largest error against the fp64 reference: " << format_real(worst_error, 2) << " ("
              << format_real(100.0 * worst_ratio, 2) << "% of the fp32 tolerance).\n";
  }
  for (const std::string& note : notes) std::cout << "infeasible: " << note << '\n';
}

void run_sweep(const SweepFlags& flags) {
  const Axes axes = parse_axes(flags);
  const bool validate = !flags.no_validate && !flags.predict_only;
  if (!flags.plot.empty()) {
    if (flags.plot == "-") throw UsageError("--plot: needs a file name (a PNG cannot go to stdout)");
    const size_t panels = axes.n.size() * axes.d.size() * flags.masks.size() * axes.passes.size();
    if (panels > kMaxPlotPanels) {
      throw UsageError("--plot: the sweep has " + std::to_string(panels) + " panels (mask x n x d x pass); at most " +
                       std::to_string(kMaxPlotPanels) + " fit in one figure");
    }
    require_gnuplot("--plot");
    check_writable(flags.plot, "--plot");
  }
  for (const auto& [path, flag] : {std::pair<std::string, const char*>{flags.csv, "--csv"}, {flags.json, "--json"}}) {
    if (!path.empty()) check_writable(path, flag);
  }
  if (flags.csv == "-" && flags.json == "-") throw UsageError("--csv, --json: only one of them can go to stdout");
  bool forward = false, backward = false;
  for (PassSet passes : axes.passes) {
    forward = forward || passes != PassSet::backward;
    backward = backward || passes != PassSet::forward;
  }

  // Every mask at every n first: a bad spec or file stops the sweep before any work.
  for (int64_t n : axes.n) {
    for (const std::string& spec : flags.masks) load_prepared_mask(spec, n, n, "--mask");
  }

  const size_t per_problem = axes.passes.size() * axes.cache_words.size() * axes.algorithms.size();
  const size_t problems = axes.n.size() * axes.d.size() * flags.masks.size();
  Progress progress(static_cast<int>(problems * (per_problem + (validate ? 1 : 0) + (flags.search_switch ? 1 : 0))));
  std::vector<Row> rows;
  for (int64_t n : axes.n) {
    for (int64_t d : axes.d) {
      const Problem problem(n, d, flags.seed, !flags.predict_only);
      for (const std::string& spec : flags.masks) {
        const Mask mask = load_prepared_mask(spec, n, n, "--mask");
        const std::string where = spec + ", n " + std::to_string(n) + ", d " + std::to_string(d);
        const size_t first = rows.size();
        Reference reference;
        if (validate) {
          progress.step(where + ": fp64 reference");
          reference = compute_reference(problem, mask, forward, backward);
        }
        for (PassSet passes : axes.passes) {
          for (int64_t m : axes.cache_words) {
            for (Algorithm algorithm : axes.algorithms) {
              progress.step(where + ", M " + std::to_string(m) + ", " + algorithm_name(algorithm) + ", " +
                            pass_set_name(passes));
              const RowRequest request{spec, m, flags.line_words, algorithm, passes, flags.predict_only};
              rows.push_back(measure_row(problem, mask, request, validate ? &reference : nullptr));
            }
          }
        }
        if (flags.search_switch) progress.step(where + ": the planner's switch M");
        if (flags.search_switch && !mask.is_full()) {
          add_switch(rows, first, problem, mask, axes.cache_words[axes.cache_words.size() / 2], flags.line_words);
        }
      }
    }
  }
  const auto feasible = std::find_if(rows.begin(), rows.end(), [](const Row& row) { return row.feasible(); });
  if (feasible == rows.end()) throw RuntimeError("sweep: nothing fits: " + rows.front().note);

  const bool to_stdout = flags.csv == "-" || flags.json == "-";
  if (!to_stdout) {
    std::cout << rows_table(rows, false);
    print_footer(rows, validate);
  }
  if (!flags.csv.empty()) write_file_atomically(flags.csv, rows_csv(rows), "--csv");
  if (!flags.json.empty()) write_file_atomically(flags.json, rows_json(rows, "sweep"), "--json");
  if (!flags.plot.empty()) {
    plot_io(rows, {},
            std::string("spattn sweep: I/O against M (lines: exact predictions; points: ") +
                (flags.predict_only ? "predicted, not run)" : "counted runs)"),
            flags.plot, "--plot");
  }
  size_t failed = 0;
  for (const Row& row : rows) failed += row.error_to_tolerance.value_or(0.0) > 1.0 ? 1 : 0;
  if (failed > 0) {
    throw RuntimeError("sweep: " + std::to_string(failed) + " rows differ from the fp64 reference by more than "
                       "the fp32 tolerance (error_to_tolerance > 1)");
  }
}

}  // namespace

void register_sweep(CLI::App& app) {
  auto flags = std::make_shared<SweepFlags>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Every combination of n, d, M, mask, algorithm and pass: counted, checked, as a table, CSV or JSON");
  cmd->add_option("--n", flags->n, "Sequence lengths: a list or range (1024,4096 or 256:4096:x2)")
      ->capture_default_str();
  cmd->add_option("--d", flags->d, "Head dimensions: a list or range (32:128:+32)")->capture_default_str();
  cmd->add_option("--cache-words,-M", flags->cache_words, "Cache sizes M in words: a list or range (64:65536:x2)")
      ->capture_default_str();
  add_line_words_flag(cmd, flags->line_words);
  cmd->add_option("--mask", flags->masks, "A PATTERN-SPEC or .mtx file (repeat the flag for several)")
      ->capture_default_str();
  cmd->add_option("--algorithm", flags->algorithm, "Any of auto, flash, small_cache, comma-separated")
      ->capture_default_str();
  cmd->add_option("--pass", flags->pass, "Any of fwd, bwd, both (both: one row adding the two passes)")
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed of the random inputs")->capture_default_str();
  cmd->add_flag("--no-validate", flags->no_validate, "Do not compare with the fp64 reference (faster)");
  cmd->add_flag("--predict-only", flags->predict_only,
                "Fill rows from the planner's exact prediction without running (for sizes too large to run)");
  cmd->add_flag("--switch", flags->search_switch,
                "Search the planner's switch M for masked rows too (full masks always have it; slower)");
  cmd->add_option("--csv", flags->csv, "Write the rows as CSV to FILE ('-': stdout, instead of the table)");
  cmd->add_option("--json", flags->json, "Write the rows and their context as JSON to FILE ('-': stdout)");
  cmd->add_option("--plot", flags->plot, "Draw I/O against M into FILE.png, one panel per mask, n, d, pass");
  cmd->callback([flags] { run_sweep(*flags); });
}

}  // namespace spattn::cli
