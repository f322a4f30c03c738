// spattn patterns: the mask library. Without a spec it lists every pattern and its parameters;
// with one it builds the mask in its compact form and prints its statistics and a block-level
// picture, from the rows' intervals where it has them (no pair by pair expansion: causal at
// n = 2^20 shows in a second), else from its pairs.
#include "cli_support.hpp"
#include "commands.hpp"
#include "plot.hpp"
#include "report.hpp"

#include <sparse_formats/convert.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>

namespace spattn::cli {

namespace {

struct PatternsOptions {
  std::string spec;
  int64_t seqlen_q = 1024;
  int64_t seqlen_k = 0;  // 0: same as seqlen_q
  int64_t block = 64;
  int64_t width = 64;
  std::string png;  // also draw the mask into this PNG
};

void list_all() {
  std::cout << "Mask patterns (use as --mask NAME or --mask NAME:key=value,...):\n\n";
  for (const auto& info : sparse_formats::list_patterns()) {
    std::cout << info.name << ": " << info.description << "\n  from: " << info.reference
              << "\n  example: " << info.example << '\n';
    for (const auto& param : info.params) {
      std::cout << "  " << param.key << " (" << param.type << ", default "
                << (param.default_value.empty() ? "none" : param.default_value)
                << "): " << param.meaning << '\n';
    }
    std::cout << '\n';
  }
  std::cout << sparse_formats::pattern_spec_syntax() << '\n';
}

void show(const PatternsOptions& options) {
  if (options.seqlen_q < 0) throw UsageError("--n: must be >= 0, got " + std::to_string(options.seqlen_q));
  if (options.seqlen_k < 0) throw UsageError("--seqlen-k: must be >= 0, got " + std::to_string(options.seqlen_k));
  if (options.block < 1) throw UsageError("--block: must be >= 1, got " + std::to_string(options.block));
  if (options.width < 8) throw UsageError("--width: must be >= 8, got " + std::to_string(options.width));
  const int64_t seqlen_k = options.seqlen_k > 0 ? options.seqlen_k : options.seqlen_q;
  if (!options.png.empty()) {
    require_gnuplot("--png");
    check_writable(options.png, "--png");
  }
  const auto start = std::chrono::steady_clock::now();
  const Mask mask = load_prepared_mask(options.spec, options.seqlen_q, seqlen_k, "patterns");
  const double build_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string held = describe_mask_memory(mask);  // (before a block mask builds its row intervals)
  // The rows as intervals: the mask's own, a block mask's, or a full mask's one interval a row.
  std::optional<sparse_formats::IntervalPattern> full_rows;
  const sparse_formats::IntervalPattern* rows = mask.row_intervals();
  if (mask.is_full()) {
    full_rows = sparse_formats::make_interval_pattern(sparse_formats::parse_pattern_spec("full"), mask.seqlen_q(),
                                                      mask.seqlen_k());
    rows = &*full_rows;
  }
  const auto stats = rows != nullptr ? sparse_formats::mask_stats(*rows, options.block, options.block)
                                     : sparse_formats::mask_stats(sparse_formats::csr_to_bsr_mask(mask.csr(), options.block, options.block));
  std::cout << "pattern:        " << options.spec << '\n'
            << "shape:          " << stats.num_rows << " x " << stats.num_cols << '\n'
            << "attended pairs: " << stats.nnz << " (density " << format_real(stats.density, 4) << ")\n"
            << "empty rows:     " << stats.empty_rows << '\n'
            << "max row length: " << stats.max_row_length << '\n'
            << "blocks " << options.block << " x " << options.block << ":  " << stats.stored_blocks
            << " stored (" << stats.full_blocks << " full, " << stats.partial_blocks
            << " partial), block density " << format_real(stats.block_density, 4) << '\n'
            << "built in:       " << format_real(build_ms, 3) << " ms (" << form_name(mask.form()) << ")\n"
            << "held as:        " << held << '\n';
  std::cout << '\n';
  std::cout << (rows != nullptr ? sparse_formats::render_mask_blocks(*rows, options.width)
                                : sparse_formats::render_mask_blocks(mask.csr(), options.width));
  if (!options.png.empty()) {  // (the plot draws the pairs: it expands the mask)
    plot_mask(mask.csr(), options.spec + "   (" + std::to_string(stats.num_rows) + " x " +
                               std::to_string(stats.num_cols) + ", density " + format_real(stats.density, 4) + ")",
              options.png, "--png");
    std::cout << "\nwrote " << options.png << '\n';
  }
}

}  // namespace

void register_patterns(CLI::App& app) {
  auto options = std::make_shared<PatternsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "patterns", "List the mask patterns, or show one: statistics and a picture of the mask");
  cmd->add_option("spec", options->spec, "A PATTERN-SPEC (e.g. sliding_window:w=128) or a .mtx file");
  cmd->add_option("--n,--seqlen-q", options->seqlen_q, "Query sequence length")->capture_default_str();
  cmd->add_option("--seqlen-k", options->seqlen_k, "Key sequence length (0: same as --n)")->capture_default_str();
  cmd->add_option("--block", options->block, "Block size for the block statistics")->capture_default_str();
  cmd->add_option("--width", options->width, "Width of the picture in characters")->capture_default_str();
  cmd->add_option("--png", options->png, "Also draw the mask into FILE.png (needs gnuplot)");
  cmd->callback([options] {
    if (options->spec.empty()) {
      if (!options->png.empty()) throw UsageError("--png: name a pattern to draw (spattn patterns SPEC --png FILE)");
      list_all();
    } else {
      show(*options);
    }
  });
}

}  // namespace spattn::cli
