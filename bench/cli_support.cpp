#include "cli_support.hpp"

#include <spattn/io.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <system_error>

namespace spattn::cli {

namespace fs = std::filesystem;

StagedDirectory::StagedDirectory(std::string directory) : directory_(std::move(directory)) {
  if (directory_.empty()) throw UsageError("--out: the output directory must not be empty");
  const fs::path target(directory_);
  if (fs::exists(target) && !fs::is_directory(target)) {
    throw UsageError("--out: '" + directory_ + "' exists and is not a directory");
  }
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code error;
  fs::create_directories(parent, error);
  std::random_device random;
  for (int attempt = 0; attempt < 16 && staging_.empty(); ++attempt) {
    const fs::path candidate =
        parent / (".spattn-staging-" + std::to_string(random()) + "-" + target.filename().string());
    if (fs::create_directory(candidate, error)) staging_ = candidate.string();
  }
  if (staging_.empty()) {
    throw std::runtime_error("--out: cannot create a staging directory beside '" + directory_ +
                             "': " + error.message());
  }
}

StagedDirectory::~StagedDirectory() {
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

std::string StagedDirectory::path(const std::string& name) {
  names_.push_back(name);
  return (fs::path(staging_) / name).string();
}

void StagedDirectory::commit(const std::vector<std::string>& outputs) {
  std::vector<std::string> targets = outputs;
  targets.insert(targets.end(), names_.begin(), names_.end());
  for (const std::string& name : targets) {
    const fs::path target = fs::path(directory_) / name;
    std::error_code error;
    const fs::file_status status = fs::symlink_status(target, error);
    if (fs::exists(status) && !fs::is_regular_file(status)) {
      throw UsageError("--out: '" + target.string() + "' exists and is not a regular file; nothing was written");
    }
  }
  fs::create_directories(directory_);
  for (const std::string& name : outputs) {
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) fs::remove(fs::path(directory_) / name);
  }
  for (const std::string& name : names_) {
    fs::rename(fs::path(staging_) / name, fs::path(directory_) / name);
  }
  committed_ = true;
}

std::string Table::render() const {
  std::vector<size_t> width(header_.size(), 0);
  auto widen = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  };
  widen(header_);
  for (const auto& row : rows_) widen(row);
  auto is_number = [](const std::string& cell) {
    return !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '-' ||
                             cell[0] == '+' || cell == "inf");
  };
  std::ostringstream out;
  auto print = [&](const std::vector<std::string>& row, bool header) {
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      const size_t pad = width[c] - cell.size();
      if (c > 0) out << "  ";
      if (!header && is_number(cell)) {
        out << std::string(pad, ' ') << cell;
      } else {
        out << cell << (c + 1 < width.size() ? std::string(pad, ' ') : "");
      }
    }
    out << '\n';
  };
  print(header_, true);
  for (const auto& row : rows_) print(row, false);
  return out.str();
}

CLI::Validator at_least(int64_t minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        try {
          size_t used = 0;
          const long long value = std::stoll(text, &used);
          if (used != text.size()) return "must be an integer, got '" + text + "'";
          if (value < minimum) return "must be >= " + std::to_string(minimum) + ", got " + text;
          return "";
        } catch (const std::exception&) {
          return "must be an integer, got '" + text + "'";
        }
      },
      ">=" + std::to_string(minimum));
}

CLI::Option* add_line_words_flag(CLI::App* cmd, int64_t& line_words) {
  const CLI::Validator power_of_two(
      [](std::string& text) -> std::string {
        try {
          size_t used = 0;
          const long long value = std::stoll(text, &used);
          if (used == text.size() && io::is_plan_line_words(value)) return "";
        } catch (const std::exception&) {
        }
        return "must be a power of two from 1 to " + std::to_string(io::kMaxLineWords) + ", got '" + text + "'";
      },
      "POWER OF TWO");
  return cmd->add_option("--line-words,-L", line_words,
                         "Line size L of the I/O model in words: 1 is the paper's word model, 16 a 64-byte line of fp32")
      ->check(power_of_two)
      ->capture_default_str();
}

std::string format_count(int64_t value) {
  if (std::llabs(value) < 10'000'000) return std::to_string(value);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3e", static_cast<double>(value));
  return buffer;
}

std::string format_real(double value, int significant) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (std::isnan(value)) return "nan";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*g", significant, value);
  return buffer;
}

}  // namespace spattn::cli

#include <sparse_formats/error.hpp>
#include <sparse_formats/matrix_market.hpp>
#include <sparse_formats/patterns.hpp>

namespace spattn::cli {

bool is_matrix_market(const std::string& path) {
  return path.size() > 4 && path.compare(path.size() - 4, 4, ".mtx") == 0;
}

sparse_formats::CsrMatrix<int64_t, float> load_csr_input(const std::string& path, const std::string& flag) {
  sparse_formats::CsrMatrix<int64_t, double> wide;
  try {
    wide = sparse_formats::read_csr_mtx<int64_t>(path);
  } catch (const sparse_formats::FormatError& error) {
    throw sparse_formats::FormatError(flag + ": " + error.what());
  }
  sparse_formats::CsrMatrix<int64_t, float> csr;
  csr.pattern = std::move(wide.pattern);
  csr.values.assign(wide.values.begin(), wide.values.end());
  return csr;
}

sparse_formats::CsrPattern<int64_t> load_mask(const std::string& spec_or_file, int64_t seqlen_q,
                                              int64_t seqlen_k, const std::string& flag) {
  if (is_matrix_market(spec_or_file)) {
    // The expected shape bounds the read: a header of another shape is refused at its size line.
    sparse_formats::CsrPattern<int64_t> mask;
    try {
      mask = sparse_formats::read_mask_mtx<int64_t>(spec_or_file, sparse_formats::ReadLimits::shape(seqlen_q, seqlen_k));
    } catch (const sparse_formats::FormatError& error) {
      throw sparse_formats::FormatError(flag + ": " + error.what());
    }
    if (mask.num_rows != seqlen_q || mask.num_cols != seqlen_k) {
      throw sparse_formats::FormatError(
          flag + ": " + spec_or_file + " is " + std::to_string(mask.num_rows) + " x " +
          std::to_string(mask.num_cols) + ", but the tensors need seqlen_q x seqlen_k = " +
          std::to_string(seqlen_q) + " x " + std::to_string(seqlen_k));
    }
    return mask;
  }
  sparse_formats::PatternSpec spec;
  try {
    spec = sparse_formats::parse_pattern_spec(spec_or_file);
    return sparse_formats::make_pattern<int64_t>(spec, seqlen_q, seqlen_k);
  } catch (const sparse_formats::FormatError& error) {
    throw UsageError(flag + ": " + error.what());
  }
}

Mask load_prepared_mask(const std::string& spec_or_file, int64_t seqlen_q, int64_t seqlen_k,
                        const std::string& flag) {
  if (spec_or_file == "full") return Mask::full(seqlen_q, seqlen_k);
  if (is_matrix_market(spec_or_file)) return Mask::from_csr(load_mask(spec_or_file, seqlen_q, seqlen_k, flag), flag);
  try {
    return Mask::from_spec(spec_or_file, seqlen_q, seqlen_k);  // in its compact form
  } catch (const sparse_formats::FormatError& error) {
    throw UsageError(flag + ": " + error.what());
  }
}

std::string describe_mask_memory(const Mask& mask) {
  std::ostringstream out;
  const double mib = static_cast<double>(mask.memory_bytes()) / (1024.0 * 1024.0);
  out << form_name(mask.form()) << ", " << mask.memory_bytes() << " bytes (" << format_real(mib, 4) << " MiB";
  if (mask.seqlen_q() > 0) {
    out << ", " << format_real(static_cast<double>(mask.memory_bytes()) / static_cast<double>(mask.seqlen_q()), 4)
        << " per query row";
  }
  if (const auto* intervals = mask.intervals()) out << ", " << intervals->num_intervals() << " intervals";
  if (const auto* blocks = mask.blocks()) {
    out << ", " << blocks->blocks.num_blocks() << " blocks of " << blocks->blocks.block_m << " x " << blocks->blocks.block_n
        << ", " << blocks->num_partial() << " partial";
  }
  out << "); as int64 CSR " << 8 * (mask.seqlen_q() + 1 + mask.nnz()) << " bytes";
  return out.str();
}

}  // namespace spattn::cli
