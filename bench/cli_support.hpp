// Shared pieces of the spattn command line: error kinds (they decide the exit code), masks from
// pattern specs or files, staged output directories, and aligned tables.
#pragma once

#include <spattn/mask.hpp>

#include <sparse_formats/csr.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace spattn::cli {

// A mistake in how the program was called (bad flag value, unknown pattern): exit code 2.
// Everything else that goes wrong (unreadable or malformed files, infeasible runs) exits 1.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

// A mask named on the command line: a PATTERN-SPEC (`causal`, `sliding_window:w=128`, ...) or a
// Matrix Market file (a path ending in .mtx). Spec errors are UsageErrors; file errors are not.
sparse_formats::CsrPattern<int64_t> load_mask(const std::string& spec_or_file, int64_t seqlen_q,
                                              int64_t seqlen_k, const std::string& flag);

// The same, as a prepared spattn::Mask ("full" stays implicit: no index arrays are built).
Mask load_prepared_mask(const std::string& spec_or_file, int64_t seqlen_q, int64_t seqlen_k,
                        const std::string& flag);
// "intervals, 25165832 bytes (24 MiB, 24 per query row, 1048576 intervals); as int64 CSR ... bytes":
// the form a mask lives in and what it holds, beside what the same mask costs pair by pair.
std::string describe_mask_memory(const Mask& mask);

// A sparse Q, K or V named on the command line: a Matrix Market file (coordinate or array) as CSR
// with float values (explicit zeros stay stored). File errors name the flag and the file.
bool is_matrix_market(const std::string& path);
sparse_formats::CsrMatrix<int64_t, float> load_csr_input(const std::string& path, const std::string& flag);

// Writes a set of files into `directory` all or nothing: every file is first written into a
// staging directory beside it, and moved into place only when all writes succeeded. On failure
// the staging directory is removed and `directory` is left as it was.
class StagedDirectory {
 public:
  explicit StagedDirectory(std::string directory);
  ~StagedDirectory();
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // The path to write `name` to now (inside the staging directory).
  std::string path(const std::string& name);
  // Replaces the set `outputs` in the directory (created if missing) by the staged files: staged
  // names move in, names of `outputs` that were not staged are removed (a forward-only run leaves no
  // dq.npy of an earlier one beside its o.npy). Every target is checked first; one that is not a
  // regular file (a directory named lse.npy) is refused, naming it, before anything changes.
  void commit(const std::vector<std::string>& outputs);

 private:
  std::string directory_;
  std::string staging_;
  std::vector<std::string> names_;
  bool committed_ = false;
};

// --line-words (-L): the line size L of the I/O model, in words, for every plan and count the
// command makes (AttentionOptions::line_words): a power of two from 1 (the paper's word model) to
// io::kMaxLineWords. Default 16, a 64-byte line of fp32.
CLI::Option* add_line_words_flag(CLI::App* cmd, int64_t& line_words);

// A table printed with aligned columns; numbers right-aligned, text left-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Validators with short messages ("must be >= 1, got -5"); CLI11's own range checks print
// the full double range.
CLI::Validator at_least(int64_t minimum);

// Number formatting for tables: integers with thousands kept compact (1.23e9 style above 1e7),
// ratios with 3 significant digits.
std::string format_count(int64_t value);
std::string format_real(double value, int significant = 3);

}  // namespace spattn::cli
