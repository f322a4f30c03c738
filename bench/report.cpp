#include "report.hpp"

#include "cli_support.hpp"

#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/io.hpp>
#include <spattn/version.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <utility>

namespace spattn::cli {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;  // keys keep the schema's order

std::string Row::algorithm() const {
  if (algorithm_forward.empty()) return algorithm_backward;
  if (algorithm_backward.empty() || algorithm_backward == algorithm_forward) return algorithm_forward;
  return algorithm_forward + "/" + algorithm_backward;
}

namespace {

template <typename T>
json optional_json(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}
json text_or_null(const std::string& text) { return text.empty() ? json(nullptr) : json(text); }

using Field = std::pair<std::string, std::function<json(const Row&)>>;

// The schema: every CSV column and JSON key, in order (documented in docs/cli.md).
const std::vector<Field>& fields() {
  static const std::vector<Field> list = {
      {"pattern", [](const Row& r) { return json(r.pattern); }},
      {"seqlen", [](const Row& r) { return json(r.seqlen); }},
      {"head_dim", [](const Row& r) { return json(r.head_dim); }},
      {"cache_words", [](const Row& r) { return json(r.cache_words); }},
      {"pass", [](const Row& r) { return json(r.pass); }},
      {"requested_algorithm", [](const Row& r) { return json(r.requested); }},
      {"source", [](const Row& r) { return json(r.source); }},
      {"note", [](const Row& r) { return text_or_null(r.note); }},
      {"density", [](const Row& r) { return json(r.density); }},
      {"z_qk", [](const Row& r) { return json(r.z_qk); }},
      {"z_input", [](const Row& r) { return json(r.z_input); }},
      {"algorithm_forward", [](const Row& r) { return text_or_null(r.algorithm_forward); }},
      {"algorithm_backward", [](const Row& r) { return text_or_null(r.algorithm_backward); }},
      {"reads", [](const Row& r) { return r.feasible() ? json(r.reads) : json(nullptr); }},
      {"writes", [](const Row& r) { return r.feasible() ? json(r.writes) : json(nullptr); }},
      {"io_words", [](const Row& r) { return r.feasible() ? json(r.total()) : json(nullptr); }},
      {"predicted_reads", [](const Row& r) { return r.feasible() ? json(r.predicted_reads) : json(nullptr); }},
      {"predicted_writes", [](const Row& r) { return r.feasible() ? json(r.predicted_writes) : json(nullptr); }},
      {"line_words", [](const Row& r) { return json(r.line_words); }},
      {"read_lines", [](const Row& r) { return optional_json(r.read_lines); }},
      {"write_lines", [](const Row& r) { return optional_json(r.write_lines); }},
      {"predicted_read_lines", [](const Row& r) { return optional_json(r.predicted_read_lines); }},
      {"predicted_write_lines", [](const Row& r) { return optional_json(r.predicted_write_lines); }},
      {"flash_io_words", [](const Row& r) { return optional_json(r.flash_io); }},
      {"small_cache_io_words", [](const Row& r) { return optional_json(r.small_cache_io); }},
      {"bound", [](const Row& r) { return json(r.bound); }},
      {"bound_large_cache", [](const Row& r) { return json(r.bound_large_cache); }},
      {"bound_small_cache", [](const Row& r) { return json(r.bound_small_cache); }},
      {"bound_crossover_m", [](const Row& r) { return json(r.bound_crossover); }},
      {"bound_kind", [](const Row& r) { return json(r.masked ? "sparse (worst case over masks)" : "dense"); }},
      {"ratio_to_bound", [](const Row& r) { return r.feasible() ? json(r.ratio_to_bound) : json(nullptr); }},
      {"ratio_to_flash", [](const Row& r) { return optional_json(r.ratio_to_flash); }},
      {"switch_forward", [](const Row& r) { return optional_json(r.switch_forward); }},
      {"switch_backward", [](const Row& r) { return optional_json(r.switch_backward); }},
      {"switches_forward", [](const Row& r) { return json(r.switches_forward); }},
      {"switches_backward", [](const Row& r) { return json(r.switches_backward); }},
      {"peak_resident_words", [](const Row& r) { return optional_json(r.peak_resident); }},
      {"max_error", [](const Row& r) { return optional_json(r.max_error); }},
      {"error_to_tolerance", [](const Row& r) { return optional_json(r.error_to_tolerance); }},
      {"plan_ms", [](const Row& r) { return optional_json(r.plan_ms); }},
      {"forward_ms", [](const Row& r) { return optional_json(r.forward_ms); }},
      {"backward_ms", [](const Row& r) { return optional_json(r.backward_ms); }},
  };
  return list;
}

std::string read_cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown" : line.substr(start);
  }
  return "unknown";
}

// The command line as the program was started (Linux: /proc/self/cmdline), for reproducibility.
std::vector<std::string> read_arguments() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> arguments;
  std::string argument;
  while (std::getline(file, argument, '\0')) arguments.push_back(argument);
  return arguments;
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

// RFC 4180: a cell holding a comma, a quote or a line break is quoted, strings and lists alike
// (a list of switches, [702,3073], is one cell).
std::string csv_cell(const json& value) {
  if (value.is_null()) return "";
  const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string count_or_dash(const std::optional<int64_t>& value) {
  return value ? format_count(*value) : std::string("-");
}
std::string real_or_dash(const std::optional<double>& value, int significant = 3) {
  return value ? format_real(*value, significant) : std::string("-");
}

}  // namespace

const std::vector<std::string>& row_field_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list;
    for (const auto& field : fields()) list.push_back(field.first);
    return list;
  }();
  return names;
}

json row_json(const Row& row) {
  json record = json::object();
  for (const auto& [name, get] : fields()) record[name] = get(row);
  return record;
}

json run_context(const std::string& command) {
  json context;
  context["tool"] = "spattn";
  context["command"] = command;
  context["arguments"] = read_arguments();
  context["version"] = spattn::version();
#ifdef SPATTN_GIT_COMMIT
  context["git_commit"] = SPATTN_GIT_COMMIT;
#else
  context["git_commit"] = "unknown";
#endif
#ifdef SPATTN_BUILD_TYPE
  context["build_type"] = SPATTN_BUILD_TYPE;
#elif defined(NDEBUG)
  context["build_type"] = "optimized (NDEBUG)";
#else
  context["build_type"] = "debug (assertions on)";
#endif
#ifdef NDEBUG
  context["assertions"] = false;
#else
  context["assertions"] = true;
#endif
  context["cuda"] = spattn::built_with_cuda();
  context["cpu_model"] = read_cpu_model();
  context["detected_cache_words"] = spattn::default_cache_words();
  context["timestamp_utc"] = utc_timestamp();
  return context;
}

std::string rows_csv(const std::vector<Row>& rows) {
  std::ostringstream out;
  const auto& names = row_field_names();
  for (size_t i = 0; i < names.size(); ++i) out << (i ? "," : "") << names[i];
  out << '\n';
  for (const Row& row : rows) {
    size_t i = 0;
    for (const auto& field : fields()) out << (i++ ? "," : "") << csv_cell(field.second(row));
    out << '\n';
  }
  return out.str();
}

std::string rows_json(const std::vector<Row>& rows, const std::string& command) {
  json document;
  document["schema"] = "spattn-rows/1";
  document["context"] = run_context(command);
  document["rows"] = json::array();
  for (const Row& row : rows) document["rows"].push_back(row_json(row));
  return document.dump(2) + "\n";
}

std::string rows_table(const std::vector<Row>& rows, bool run_columns) {
  std::vector<std::string> header =
      run_columns ? std::vector<std::string>{"pattern", "density", "Z_input", "Z_QK", "M", "algorithm", "reads",
                                             "writes", "lines", "bound", "ratio", "flash I/O", "max err", "plan ms", "fwd ms",
                                             "bwd ms"}
                  : std::vector<std::string>{"pattern", "n", "d", "M", "pass", "algorithm", "source", "reads",
                                             "writes", "lines", "flash I/O", "small_cache I/O", "bound", "ratio", "max err",
                                             "plan ms", "fwd ms", "bwd ms"};
  Table table(header);
  const Row* previous = nullptr;
  for (const Row& row : rows) {
    // Repeated problem columns are left blank, so each mask's rows read as a block.
    const bool blank = previous != nullptr && previous->pattern == row.pattern && previous->seqlen == row.seqlen &&
                       previous->head_dim == row.head_dim;
    previous = &row;
    const bool ok = row.feasible();
    const std::string reads = ok ? format_count(row.reads) : "-";
    const std::string writes = ok ? format_count(row.writes) : "-";
    // Lines of 16 words, read + written: counted, or predicted when not run ("-": not modelled).
    const std::string lines = ok && row.read_lines ? format_count(*row.read_lines + row.write_lines.value_or(0)) : "-";
    const std::string bound = ok ? format_real(row.bound) : "-";
    const std::string ratio = ok ? format_real(row.ratio_to_bound) : "-";
    const std::string error = real_or_dash(row.max_error, 2);
    if (run_columns) {
      table.add_row({blank ? "" : row.pattern, blank ? "" : format_real(row.density),
                     blank ? "" : format_count(static_cast<int64_t>(row.z_input)), blank ? "" : format_count(row.z_qk),
                     std::to_string(row.cache_words), ok ? row.algorithm() : row.requested, reads, writes, lines, bound,
                     ratio, count_or_dash(row.flash_io), error, real_or_dash(row.plan_ms),
                     real_or_dash(row.forward_ms), real_or_dash(row.backward_ms)});
    } else {
      // "auto: flash" when the planner chose, the algorithm's name when it was requested.
      const std::string algorithm = !ok ? row.requested : row.requested == "auto" ? "auto: " + row.algorithm() : row.algorithm();
      table.add_row({blank ? "" : row.pattern, blank ? "" : std::to_string(row.seqlen),
                     blank ? "" : std::to_string(row.head_dim), std::to_string(row.cache_words), row.pass, algorithm,
                     row.source, reads, writes, lines, count_or_dash(row.flash_io), count_or_dash(row.small_cache_io), bound,
                     ratio, error, real_or_dash(row.plan_ms), real_or_dash(row.forward_ms),
                     real_or_dash(row.backward_ms)});
    }
  }
  return table.render();
}

void check_writable(const std::string& path, const std::string& flag) {
  if (path.empty()) throw UsageError(flag + ": the file name must not be empty");
  if (path == "-") return;
  const fs::path target(path);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code error;
  if (!fs::is_directory(parent, error)) {
    throw RuntimeError(flag + ": cannot write '" + path + "': directory '" + parent.string() + "' does not exist");
  }
  if (fs::is_directory(target, error)) throw RuntimeError(flag + ": cannot write '" + path + "': it is a directory");
  if (::access(parent.c_str(), W_OK) != 0) {
    throw RuntimeError(flag + ": cannot write '" + path + "': directory '" + parent.string() + "' is not writable");
  }
}

void write_file_atomically(const std::string& path, const std::string& content, const std::string& flag) {
  if (path == "-") {
    std::cout << content << std::flush;
    return;
  }
  check_writable(path, flag);
  const fs::path target(path);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string temp = (parent / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) throw RuntimeError(flag + ": cannot create a temporary file beside '" + path + "': " + std::strerror(errno));
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  const bool closed = ::close(fd) == 0;
  // mkstemp creates 0600; give the result the usual permissions.
  std::error_code ignored;
  fs::permissions(temp, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  ignored);
  if (written != content.size() || !closed || std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    fs::remove(temp, ignored);
    throw RuntimeError(flag + ": cannot write '" + path + "': " + reason);
  }
}

}  // namespace spattn::cli
