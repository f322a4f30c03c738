#include "plot.hpp"

#include "cli_support.hpp"

#include <spattn/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace spattn::cli {

namespace fs = std::filesystem;

namespace {

bool gnuplot_on_path() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    if (::access((fs::path(dir) / "gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

// A gnuplot string literal: single quotes, a quote doubled.
std::string gp_string(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A temporary directory for the data and script, removed on every path out.
class TempDir {
 public:
  explicit TempDir(const std::string& flag) {
    std::string pattern = (fs::temp_directory_path() / "spattn-plot-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw RuntimeError(flag + ": cannot create a temporary directory: " + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

void write_text(const std::string& path, const std::string& text, const std::string& flag) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw RuntimeError(flag + ": cannot write the temporary file " + path);
}

// Runs `script` (which must `set output` to the placeholder @OUTPUT@) and moves the PNG into place.
void run_gnuplot(const TempDir& temp, std::string script, const std::string& png_path, const std::string& flag) {
  require_gnuplot(flag);
  check_writable(png_path, flag);
  const fs::path target(png_path);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string staged = (parent / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(staged.data());
  if (fd < 0) throw RuntimeError(flag + ": cannot create a file beside '" + png_path + "': " + std::strerror(errno));
  ::close(fd);
  script.replace(script.find("@OUTPUT@"), 8, gp_string(staged));
  write_text(temp.file("plot.gp"), script, flag);
  const std::string command =
      "gnuplot " + shell_quoted(temp.file("plot.gp")) + " > /dev/null 2> " + shell_quoted(temp.file("stderr.txt"));
  const int status = std::system(command.c_str());
  std::error_code ignored;
  if (status != 0 || fs::file_size(staged, ignored) == 0) {
    fs::remove(staged, ignored);
    std::ifstream err(temp.file("stderr.txt"));
    std::string line, last;
    while (std::getline(err, line)) {
      if (line.find_first_not_of(" ^\t") != std::string::npos) last = line;
    }
    throw RuntimeError(flag + ": gnuplot failed" + (last.empty() ? std::string() : ": " + last));
  }
  fs::permissions(staged, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read,
                  ignored);
  if (std::rename(staged.c_str(), png_path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    fs::remove(staged, ignored);
    throw RuntimeError(flag + ": cannot write '" + png_path + "': " + reason);
  }
}

// "64", "1K", "256K", "4M": tick labels for cache sizes.
std::string words_label(double m) {
  const auto value = static_cast<int64_t>(std::llround(m));
  if (value >= (int64_t{1} << 20) && value % (int64_t{1} << 20) == 0) return std::to_string(value >> 20) + "M";
  if (value >= 1024 && value % 1024 == 0) return std::to_string(value >> 10) + "K";
  return std::to_string(value);
}

// ---- the I/O figure --------------------------------------------------------------------------

struct Series {
  std::string title;
  std::string style;  // gnuplot "with ..." clause
  std::vector<std::pair<double, double>> points;
};

struct Panel {
  std::string key, title;
  std::vector<const Row*> rows, curves;
};

std::string panel_key(const Row& row) {
  return row.pattern + "\n" + std::to_string(row.seqlen) + "\n" + std::to_string(row.head_dim) + "\n" + row.pass;
}

// Where the flash and small_cache lines cross: the planner's exact switch for one pass when it was
// searched, otherwise interpolated in log-log between the neighbouring samples (marked "≈").
std::pair<double, std::string> crossover(const Panel& panel, const std::map<int64_t, const Row*>& samples) {
  const Row& first = *panel.rows.front();
  const std::optional<int64_t> exact = first.pass == "fwd" ? first.switch_forward
                                       : first.pass == "bwd" ? first.switch_backward : std::nullopt;
  if (exact) return {static_cast<double>(*exact), "planner switches at M = " + std::to_string(*exact)};
  // Otherwise where the sampled lines cross, interpolated in log-log.
  const Row* previous = nullptr;
  for (const auto& [m, row] : samples) {
    if (!row->flash_io || !row->small_cache_io) continue;
    if (previous != nullptr) {
      const double a = std::log(static_cast<double>(*previous->flash_io) / static_cast<double>(*previous->small_cache_io));
      const double b = std::log(static_cast<double>(*row->flash_io) / static_cast<double>(*row->small_cache_io));
      if ((a > 0) != (b > 0)) {
        const double x0 = std::log(static_cast<double>(previous->cache_words));
        const double x1 = std::log(static_cast<double>(m));
        const double x = std::exp(x0 + (x1 - x0) * a / (a - b));
        return {x, "flash = small\\_cache at M ≈ " + format_count(std::llround(x))};
      }
    }
    previous = row;
  }
  return {0.0, ""};
}

void write_panel(std::ostringstream& script, std::ostringstream& data, int& block, const Panel& panel,
                 const std::string& data_file) {
  std::map<int64_t, const Row*> samples;
  for (const auto* list : {&panel.rows, &panel.curves}) {
    for (const Row* row : *list) {
      if (row->feasible()) samples.emplace(row->cache_words, row);
    }
  }
  std::vector<Series> series = {
      {"flash (predicted = counted)", "lines lw 2 lc rgb '#1f77b4'", {}},
      {"small\\_cache (predicted = counted)", "lines lw 2 lc rgb '#d62728'", {}},
      {"bound, 1/M branch", "lines dt 2 lw 1.5 lc rgb '#555555'", {}},
      {"bound, 1/sqrt(M) branch", "lines dt 3 lw 1.5 lc rgb '#999999'", {}},
  };
  for (const auto& [m, row] : samples) {
    const auto x = static_cast<double>(m);
    if (row->flash_io) series[0].points.emplace_back(x, static_cast<double>(*row->flash_io));
    if (row->small_cache_io) series[1].points.emplace_back(x, static_cast<double>(*row->small_cache_io));
    series[2].points.emplace_back(x, row->bound_large_cache);
    series[3].points.emplace_back(x, row->bound_small_cache);
  }
  // The rows themselves, one series per (requested algorithm, source).
  std::map<std::string, Series> own;
  for (const Row* row : panel.rows) {
    if (!row->feasible()) continue;
    const std::string who = row->requested == "auto" ? "planner's choice" : row->requested;
    const std::string name = (row->ran() ? "counted: " : "predicted: ") + who;
    const std::string color = row->requested == "flash" ? "#1f77b4" : row->requested == "small_cache" ? "#d62728" : "#000000";
    const int point_type = row->requested == "flash" ? 5 : row->requested == "small_cache" ? 9 : (row->ran() ? 7 : 6);
    auto& s = own[name];
    s.title = name;
    std::string escaped;
    for (char c : name) escaped += c == '_' ? std::string("\\_") : std::string(1, c);
    s.title = escaped;
    s.style = "points pt " + std::to_string(point_type) + " ps 1.3 lc rgb '" + color + "'";
    s.points.emplace_back(static_cast<double>(row->cache_words), static_cast<double>(row->total()));
  }
  for (auto& [name, s] : own) series.push_back(s);

  const double low = static_cast<double>(samples.begin()->first);
  const double high = static_cast<double>(samples.rbegin()->first);
  script << "set title " << gp_string(panel.title) << " noenhanced\n";
  std::ostringstream tics;
  int step = 1;
  while (std::log2(high / low) / step > 7) ++step;
  for (double m = std::exp2(std::floor(std::log2(low))); m <= high * 1.0001; m *= std::exp2(step)) {
    tics << (tics.tellp() > 0 ? ", " : "") << gp_string(words_label(m)) << " " << m;
  }
  script << "set xtics (" << tics.str() << ")\n";
  script << "set xrange [" << low / 1.3 << ":" << high * 1.3 << "]\n";
  // The crossovers as vertical lines spanning the panel's values, named in the key.
  double y_low = INFINITY, y_high = 0.0;
  for (const Series& s : series) {
    for (const auto& point : s.points) {
      y_low = std::min(y_low, point.second);
      y_high = std::max(y_high, point.second);
    }
  }
  auto vertical = [&](double x, const std::string& title, const std::string& style) {
    if (x >= low && x <= high && y_high > 0.0) series.push_back({title, style, {{x, y_low}, {x, y_high}}});
  };
  const auto [cross, cross_label] = crossover(panel, samples);
  vertical(cross, cross_label, "lines dt 4 lw 2 lc rgb '#2ca02c'");
  const Row& first = *panel.rows.front();
  vertical(first.bound_crossover,
           std::string("bound branches meet: ") + (first.masked ? "Z_{input}^2/Z_{QK}" : "d^2") + " = " +
               format_count(std::llround(first.bound_crossover)),
           "lines dt 3 lw 1.5 lc rgb '#9467bd'");
  std::string plot;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    for (const auto& [x, y] : s.points) data << x << ' ' << std::max(y, 1e-300) << '\n';
    data << "\n\n";
    plot += std::string(plot.empty() ? "plot " : ", \\\n     ") + gp_string(data_file) + " index " +
            std::to_string(block++) + " using 1:2 with " + s.style + " title " + gp_string(s.title);
  }
  script << plot << "\n";
}

}  // namespace

void require_gnuplot(const std::string& flag) {
  if (!gnuplot_on_path()) {
    throw RuntimeError(flag + ": gnuplot is not installed (Debian: apt-get install gnuplot-nox, or run "
                              "scripts/install_deps.sh); nothing was drawn");
  }
}

void plot_io(const std::vector<Row>& rows, const std::vector<Row>& curves, const std::string& title,
             const std::string& png_path, const std::string& flag) {
  std::vector<Panel> panels;
  auto find = [&panels](const Row& row) -> Panel* {
    const std::string key = panel_key(row);
    for (Panel& panel : panels) {
      if (panel.key == key) return &panel;
    }
    return nullptr;
  };
  for (const Row& row : rows) {
    if (!row.feasible()) continue;
    Panel* panel = find(row);
    if (panel == nullptr) {
      const std::string pass = row.pass == "both" ? "forward + backward" : row.pass == "fwd" ? "forward" : "backward";
      panels.push_back({panel_key(row),
                        row.pattern + "   (n " + std::to_string(row.seqlen) + ", d " + std::to_string(row.head_dim) + ", " + pass + ")",
                        {}, {}});
      panel = &panels.back();
    }
    panel->rows.push_back(&row);
  }
  for (const Row& row : curves) {
    if (Panel* panel = find(row)) panel->curves.push_back(&row);
  }
  if (panels.empty()) throw RuntimeError(flag + ": no feasible rows to plot");
  if (panels.size() > kMaxPlotPanels) {
    throw UsageError(flag + ": " + std::to_string(panels.size()) + " panels (mask x n x d x pass) to draw; at most " +
                     std::to_string(kMaxPlotPanels) + " fit in one figure");
  }
  const size_t columns = panels.size() == 1 ? 1 : panels.size() <= 4 ? 2 : panels.size() <= 9 ? 3 : 4;
  const size_t lines = (panels.size() + columns - 1) / columns;
  TempDir temp(flag);
  const std::string data_file = temp.file("io.dat");
  std::ostringstream script, data;
  script << "set terminal pngcairo size " << 620 * columns << "," << 470 * lines + 40 << " font 'sans,9'\n"
         << "set output @OUTPUT@\n"
         << "set logscale xy\nset grid xtics ytics mxtics mytics lc rgb '#e5e5e5'\n"
         << "set format y '10^{%T}'\nset xlabel 'fast memory M (words)'\nset ylabel 'I/O (words read + written)'\n"
         << "set key bottom left font ',8' spacing 0.9 samplen 2.5\n"
         << "set multiplot layout " << lines << "," << columns << " title " << gp_string(title)
         << " font ',11' noenhanced\n";
  int block = 0;
  for (const Panel& panel : panels) write_panel(script, data, block, panel, data_file);
  script << "unset multiplot\n";
  write_text(data_file, data.str(), flag);
  run_gnuplot(temp, script.str(), png_path, flag);
}

void plot_mask(const sparse_formats::CsrPatternView<int64_t>& mask, const std::string& title,
               const std::string& png_path, const std::string& flag) {
  if (mask.num_rows == 0 || mask.num_cols == 0) {
    throw UsageError(flag + ": the mask is " + std::to_string(mask.num_rows) + " x " + std::to_string(mask.num_cols) +
                     "; nothing to draw");
  }
  const int64_t row_bins = std::min<int64_t>(mask.num_rows, 512);
  const int64_t col_bins = std::min<int64_t>(mask.num_cols, 512);
  std::vector<double> count(static_cast<size_t>(row_bins * col_bins), 0.0);
  for (int64_t i = 0; i < mask.num_rows; ++i) {
    const int64_t r = i * row_bins / mask.num_rows;
    for (int64_t e = mask.row_begin(i); e < mask.row_end(i); ++e) {
      const int64_t c = static_cast<int64_t>(mask.col_idx[e]) * col_bins / mask.num_cols;
      count[static_cast<size_t>(r * col_bins + c)] += 1.0;
    }
  }
  // A bin's area: the rows and columns that map to it.
  auto extent = [](int64_t bin, int64_t bins, int64_t total) {
    auto first = [&](int64_t b) { return (b * total + bins - 1) / bins; };
    return static_cast<double>(first(bin + 1) - first(bin));
  };
  TempDir temp(flag);
  std::ostringstream data;
  for (int64_t r = 0; r < row_bins; ++r) {
    for (int64_t c = 0; c < col_bins; ++c) {
      const double area = extent(r, row_bins, mask.num_rows) * extent(c, col_bins, mask.num_cols);
      data << (c ? " " : "") << (area > 0 ? count[static_cast<size_t>(r * col_bins + c)] / area : 0.0);
    }
    data << '\n';
  }
  write_text(temp.file("mask.dat"), data.str(), flag);
  const double sx = static_cast<double>(mask.num_cols) / static_cast<double>(col_bins);
  const double sy = static_cast<double>(mask.num_rows) / static_cast<double>(row_bins);
  std::ostringstream script;
  script << "set terminal pngcairo size 760,700 font 'sans,10'\nset output @OUTPUT@\n"
         << "set title " << gp_string(title) << " noenhanced\n"
         << "set xlabel 'key j'\nset ylabel 'query i'\nset tics out\n"
         << "set xrange [0:" << mask.num_cols << "]\nset yrange [" << mask.num_rows << ":0]\n"
         << "set size ratio " << static_cast<double>(mask.num_rows) / static_cast<double>(mask.num_cols) << "\n"
         << "set palette defined (0 'white', 0.001 '#dbe9f6', 1 '#08306b')\nset cbrange [0:1]\n"
         << "set cblabel 'fraction of pairs that attend'\n"
         << "plot " << gp_string(temp.file("mask.dat")) << " matrix using (($1 + 0.5) * " << sx << "):(($2 + 0.5) * "
         << sy << "):3 with image notitle\n";
  run_gnuplot(temp, script.str(), png_path, flag);
}

}  // namespace spattn::cli
