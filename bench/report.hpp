// The rows that spattn run and spattn sweep produce, and their three outputs: an aligned table
// (stdout), CSV and JSON (files written atomically: a temporary file beside the target, renamed
// into place only when complete). One list of fields (row_fields) defines the CSV header, the JSON
// record keys and their order, so the two cannot drift apart; docs/cli.md documents the schema.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spattn::cli {

// One measured (or predicted) problem: a mask at (n, d), a cache size M, one requested algorithm,
// forward, backward or both passes (a "both" row adds the two passes' words, bounds and times).
struct Row {
  // The problem.
  std::string pattern;        // the PATTERN-SPEC or .mtx path
  int64_t seqlen = 0;         // n = seqlen_q = seqlen_k
  int64_t head_dim = 0;       // d = head_dim = head_dim_v
  int64_t cache_words = 0;    // M
  int64_t line_words = 16;    // L: the plan and the lines counted are in lines of L words
  std::string pass;           // "fwd", "bwd" or "both"
  std::string requested;      // "auto", "flash" or "small_cache"
  // "counted": ran with the ledger (counts == prediction, checked); "predicted": the planner's exact
  // prediction, not run (--predict-only); "infeasible": the requested algorithm does not fit in M.
  std::string source;
  std::string note;           // why a row is infeasible; empty otherwise
  // The mask.
  double density = 0.0;
  int64_t z_qk = 0;           // attended pairs
  double z_input = 0.0;       // (nnz(Q) + nnz(K)) / 2
  // What ran ("" for a pass the row does not include).
  std::string algorithm_forward, algorithm_backward;
  int64_t reads = 0, writes = 0;                      // counted, or predicted when not run
  int64_t predicted_reads = 0, predicted_writes = 0;  // the plan's
  // Lines of 16 words (spattn/io.hpp's line model): counted by a counted row's ledger; predicted
  // where the plan predicts them for every pass of the row (the dense schedules).
  std::optional<int64_t> read_lines, write_lines;
  std::optional<int64_t> predicted_read_lines, predicted_write_lines;
  std::optional<int64_t> flash_io, small_cache_io;    // both algorithms' predictions (absent: infeasible)
  double bound = 0.0, bound_large_cache = 0.0, bound_small_cache = 0.0;
  double bound_crossover = 0.0;  // M at which the bound's branches meet: d^2, or Z_input^2 / Z_QK
  double ratio_to_bound = 0.0;
  std::optional<double> ratio_to_flash;
  bool masked = false;
  // The M at which the planner switches algorithm, per pass (absent: not searched or none in range).
  std::optional<int64_t> switch_forward, switch_backward;
  // Every M at which it switches, per pass, ascending (empty: not searched or none in range).
  std::vector<int64_t> switches_forward, switches_backward;
  std::optional<int64_t> peak_resident;               // counted rows only
  std::optional<double> max_error;                    // against the fp64 reference, when validated
  std::optional<double> error_to_tolerance;           // max over outputs of error / fp32 tolerance
  std::optional<double> plan_ms;                      // plan_attention for the row's passes (cold)
  std::optional<double> forward_ms, backward_ms;      // wall time of the counted API calls

  int64_t total() const { return reads + writes; }
  bool ran() const { return source == "counted"; }
  bool feasible() const { return source != "infeasible"; }
  // The chosen algorithm in one word: "flash", "small_cache", "flash/small_cache" (fwd/bwd differ).
  std::string algorithm() const;
};

// Where and how the rows were produced: the JSON "context" block.
nlohmann::ordered_json run_context(const std::string& command);

// One row as a JSON record (keys in row_field_names() order; absent values are null).
nlohmann::ordered_json row_json(const Row& row);
const std::vector<std::string>& row_field_names();

std::string rows_csv(const std::vector<Row>& rows);
std::string rows_json(const std::vector<Row>& rows, const std::string& command);

// The terminal table: spattn run's columns (mask statistics, reads, writes, bound, flash, error,
// times) or spattn sweep's (n, d, pass, source, both algorithms' predictions). A mask's name and
// statistics appear on the first of its consecutive rows only.
std::string rows_table(const std::vector<Row>& rows, bool run_columns);

// Checks up front that `path` can be written later (its directory exists), so a long run does not
// fail at the end; `flag` names the option in the message.
void check_writable(const std::string& path, const std::string& flag);
// Writes `content` to `path` atomically ("-" writes to stdout).
void write_file_atomically(const std::string& path, const std::string& content, const std::string& flag);

}  // namespace spattn::cli
