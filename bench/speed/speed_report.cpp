#include "speed_report.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

namespace spattn::bench {

namespace {

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

// A CSV field: quoted (RFC 4180) when it holds a comma or a quote, as a spec's parameters do.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

const CaseResult* find(const std::vector<CaseResult>& results, const std::string& mask, int64_t n,
                       int64_t d, Algorithm algorithm, int64_t cache_words) {
  for (const CaseResult& r : results) {
    if (r.mask == mask && r.seqlen == n && r.head_dim == d && r.requested == algorithm &&
        r.cache_words == cache_words) {
      return &r;
    }
  }
  return nullptr;
}

// The fast-memory sizes the run measured, in order of first appearance.
std::vector<int64_t> cache_sizes(const std::vector<CaseResult>& results) {
  std::vector<int64_t> sizes;
  for (const CaseResult& r : results) {
    if (std::find(sizes.begin(), sizes.end(), r.cache_words) == sizes.end()) sizes.push_back(r.cache_words);
  }
  return sizes;
}

}  // namespace

std::string algorithm_label(const CaseResult& r) {
  if (r.requested != Algorithm::automatic) return algorithm_name(r.requested);
  std::string label = std::string("auto>") + algorithm_name(r.forward_ran);
  if (r.backward_ran != r.forward_ran) label += std::string("/") + algorithm_name(r.backward_ran);
  return label;
}

void print_table_header(std::ostream& out, const std::optional<Roofline>& roofline) {
  char line[256];
  std::snprintf(line, sizeof line, "%-14s %6s %4s %-22s %7s %8s %10s %10s %10s %8s %8s %8s %7s %8s %4s\n",
                "mask", "n", "d", "algorithm", "M", "density", "fwd ms", "bwd ms", "f+b ms", "fwd GF/s",
                "bwd GF/s", "f+b GF/s", roofline ? "%sgemm" : "", "plan ms", "reps");
  out << line;
}

void print_table_row(std::ostream& out, const CaseResult& r, const std::optional<Roofline>& roofline) {
  char line[256];
  const std::string share = roofline ? format("%.1f", 100.0 * r.both_gflops() / roofline->gflops) : "";
  std::snprintf(line, sizeof line,
                "%-14s %6lld %4lld %-22s %7lld %8.4f %10.2f %10.2f %10.2f %8.2f %8.2f %8.2f %7s %8.2f %4d\n",
                r.mask.c_str(), static_cast<long long>(r.seqlen), static_cast<long long>(r.head_dim),
                algorithm_label(r).c_str(), static_cast<long long>(r.cache_words), r.density, 1e3 * r.forward_s, 1e3 * r.backward_s,
                1e3 * r.both_s, r.forward_gflops(), r.backward_gflops(), r.both_gflops(),
                share.c_str(), 1e3 * r.plan_s, r.repetitions);
  out << line;
  out.flush();
}

void write_csv(const std::string& path, const std::vector<CaseResult>& results,
               const std::optional<Roofline>& roofline) {
  std::ofstream csv(path);
  csv << "mask,seqlen,head_dim,heads,threads,cache_words,algorithm,forward_ran,backward_ran,density,nnz,"
         "forward_ms,backward_ms,both_ms,forward_gflops,backward_gflops,both_gflops,"
         "sgemm_gflops,plan_ms,repetitions\n";
  for (const CaseResult& r : results) {
    csv << csv_field(r.mask) << ',' << r.seqlen << ',' << r.head_dim << ',' << r.heads << ',' << r.threads << ','
        << r.cache_words << ',' << algorithm_name(r.requested) << ',' << algorithm_name(r.forward_ran) << ','
        << algorithm_name(r.backward_ran) << ',' << r.density << ',' << r.nnz << ','
        << 1e3 * r.forward_s << ',' << 1e3 * r.backward_s << ',' << 1e3 * r.both_s << ','
        << r.forward_gflops() << ',' << r.backward_gflops() << ',' << r.both_gflops() << ','
        << (roofline ? roofline->gflops : 0.0) << ',' << 1e3 * r.plan_s << ',' << r.repetitions << '\n';
  }
  if (!csv) throw std::runtime_error("spattn_bench: cannot write " + path);
}

namespace {

// The median over repetitions of a[i] / b[i] (two slots of one run_case call: as many repetitions,
// the i-th of each side by side).
double paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) {
    throw std::logic_error("spattn_bench: paired_ratio needs two slots of one run_case call");
  }
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size(); ++i) ratios.push_back(a[i] / b[i]);
  return median(ratios);
}

// The targets among the cases run at fast-memory size m.
void print_targets_at(std::ostream& out, const std::vector<CaseResult>& results,
                      const std::optional<Roofline>& roofline, int64_t m) {
  char line[320];
  // 1. Full mask, n 4096, d 64: fwd+bwd >= 30% of sgemm.
  for (Algorithm algorithm : {Algorithm::flash, Algorithm::automatic}) {
    const CaseResult* full = find(results, "full", 4096, 64, algorithm, m);
    if (full == nullptr) continue;
    if (!roofline) {
      out << "  full n 4096 d 64: no sgemm roofline in this run\n";
      break;
    }
    const double share = full->both_gflops() / roofline->gflops;
    std::snprintf(line, sizeof line,
                  "  full n 4096 d 64 %-10s fwd+bwd %.2f GFLOP/s = %.1f%% of sgemm %.1f GFLOP/s "
                  "(%d threads; target >= 30%%): %s\n",
                  algorithm_label(*full).c_str(), full->both_gflops(), 100.0 * share, roofline->gflops,
                  full->threads, share >= 0.30 ? "met" : "NOT met");
    out << line;
  }
  // 2. Sliding window w = 128 at n 4096: time <= 1.3 x full time x density.
  for (int64_t d : {int64_t{64}, int64_t{128}}) {
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::automatic}) {
      const CaseResult* window = find(results, "window", 4096, d, algorithm, m);
      const CaseResult* full = find(results, "full", 4096, d, algorithm, m);
      if (window == nullptr || full == nullptr) continue;
      for (const auto& [pass, w, f] :
           {std::tuple<const char*, double, double>{"fwd", window->forward_s, full->forward_s},
            {"bwd", window->backward_s, full->backward_s},
            {"fwd+bwd", window->both_s, full->both_s}}) {
        const double ratio = w / (f * window->density);
        std::snprintf(line, sizeof line,
                      "  window w 128 n 4096 d %-3lld %-10s %-7s %.2f ms vs full %.2f ms x density "
                      "%.4f: %.2fx (target <= 1.3x): %s\n",
                      static_cast<long long>(d), algorithm_label(*window).c_str(), pass, 1e3 * w,
                      1e3 * f, window->density, ratio, ratio <= 1.3 ? "met" : "NOT met");
        out << line;
      }
    }
  }
  // 3. Auto within 10% of the faster of flash and small_cache (of flash alone where small_cache
  // was not run: above --small-cache-max-n). The faster is the one with the smaller median; the
  // ratio is the median over repetitions of auto's time over the faster's in the same repetition
  // (the slots take turns in each: paired under the same load, as the window target).
  int compared = 0, violations = 0, wrong_choices = 0;
  double worst = 0.0;
  constexpr double kNotRun = std::numeric_limits<double>::infinity();
  for (const CaseResult& a : results) {
    if (a.requested != Algorithm::automatic || a.cache_words != m) continue;
    const CaseResult* flash = find(results, a.mask, a.seqlen, a.head_dim, Algorithm::flash, m);
    const CaseResult* small = find(results, a.mask, a.seqlen, a.head_dim, Algorithm::small_cache, m);
    if (flash == nullptr) continue;
    // What auto ran in the pass ("both" when fwd and bwd differ: then it matches neither run).
    const auto ran = [&](const std::string& pass) -> std::string {
      if (pass == "fwd") return algorithm_name(a.forward_ran);
      if (pass == "bwd" || a.forward_ran == a.backward_ran) return algorithm_name(a.backward_ran);
      return "both";
    };
    using Runs = std::vector<double> CaseResult::*;
    for (const auto& [pass, t_auto, t_flash, t_small, runs] :
         {std::tuple<std::string, double, double, double, Runs>{"fwd", a.forward_s, flash->forward_s,
                                                                 small ? small->forward_s : kNotRun,
                                                                 &CaseResult::forward_runs_s},
          {"bwd", a.backward_s, flash->backward_s, small ? small->backward_s : kNotRun, &CaseResult::backward_runs_s},
          {"fwd+bwd", a.both_s, flash->both_s, small ? small->both_s : kNotRun, &CaseResult::both_runs_s}}) {
      ++compared;
      const std::string faster = t_flash <= t_small ? "flash" : "small_cache";
      const double ratio = paired_ratio(a.*runs, (t_flash <= t_small ? *flash : *small).*runs);
      const bool right_choice = ran(pass) == faster;
      worst = std::max(worst, ratio);
      if (!right_choice) ++wrong_choices;
      if (ratio > 1.10) {
        ++violations;
        const std::string small_ms = small ? format("%.2f ms", 1e3 * t_small) : "not run";
        std::snprintf(line, sizeof line,
                      "  auto slower: %s n %lld d %lld %s: %s %.2f ms, flash %.2f ms, small_cache "
                      "%s (medians; per repetition %.2fx; %s)\n",
                      a.mask.c_str(), static_cast<long long>(a.seqlen),
                      static_cast<long long>(a.head_dim), pass.c_str(), algorithm_label(a).c_str(),
                      1e3 * t_auto, 1e3 * t_flash, small_ms.c_str(), ratio,
                      right_choice ? "ran the faster algorithm: the same code, timing spread"
                                   : "ran the slower algorithm");
        out << line;
      }
    }
  }
  if (compared > 0) {
    std::snprintf(line, sizeof line,
                  "  auto vs the faster of flash and small_cache (per repetition, median): %d "
                  "comparisons, worst %.2fx, %d above 1.10x (target: none): %s; auto ran the slower "
                  "algorithm in %d\n",
                  compared, worst, violations, violations == 0 ? "met" : "NOT met", wrong_choices);
    out << line;
  }
}

}  // namespace

WindowRatio window_ratio(const CaseResult& full, const CaseResult& window) {
  if (full.both_runs_s.size() != window.both_runs_s.size() || full.both_runs_s.empty()) {
    throw std::logic_error("spattn_bench: window_ratio needs the two slots of one run_case call");
  }
  WindowRatio ratio{full, window};
  const double density = window.density;  // the full mask's is 1
  ratio.of_medians = window.both_s / (full.both_s * density);
  std::vector<double> pairs;
  for (size_t i = 0; i < full.both_runs_s.size(); ++i) {
    pairs.push_back(window.both_runs_s[i] / (full.both_runs_s[i] * density));
  }
  ratio.pairs = static_cast<int>(pairs.size());
  ratio.pair_median = median(pairs);
  ratio.pair_min = *std::min_element(pairs.begin(), pairs.end());
  ratio.pair_max = *std::max_element(pairs.begin(), pairs.end());
  return ratio;
}

void print_window_targets(std::ostream& out, const std::vector<WindowRatio>& ratios) {
  char line[320];
  out << "\nWindow target: window / (full x density) <= 1.3x, fwd+bwd (reported, not asserted);\n"
         "full and window took turns in every repetition, so repetition i of each ran under the "
         "same load:\n";
  for (const WindowRatio& r : ratios) {
    std::snprintf(line, sizeof line,
                  "  n %lld d %-3lld %-10s M %lld: window %.2f ms vs full %.2f ms x density %.4f "
                  "(medians): %.2fx (target <= 1.3x): %s\n"
                  "      per repetition (%d pairs): median %.2fx, min %.2fx, max %.2fx\n",
                  static_cast<long long>(r.window.seqlen), static_cast<long long>(r.window.head_dim),
                  algorithm_label(r.window).c_str(), static_cast<long long>(r.window.cache_words),
                  1e3 * r.window.both_s, 1e3 * r.full.both_s, r.window.density, r.of_medians,
                  r.met() ? "met" : "NOT met", r.pairs, r.pair_median, r.pair_min, r.pair_max);
    out << line;
  }
}

void write_window_csv(const std::string& path, const std::vector<WindowRatio>& ratios) {
  std::ofstream csv(path);
  csv << "seqlen,head_dim,heads,threads,cache_words,algorithm,density,full_ms,window_ms,"
         "ratio_of_medians,pairs,pair_ratio_median,pair_ratio_min,pair_ratio_max,target_met\n";
  for (const WindowRatio& r : ratios) {
    const CaseResult& w = r.window;
    csv << w.seqlen << ',' << w.head_dim << ',' << w.heads << ',' << w.threads << ',' << w.cache_words
        << ',' << algorithm_name(w.requested) << ',' << w.density << ','
        << 1e3 * r.full.both_s << ',' << 1e3 * w.both_s << ',' << r.of_medians << ',' << r.pairs << ','
        << r.pair_median << ',' << r.pair_min << ',' << r.pair_max << ',' << (r.met() ? 1 : 0) << '\n';
  }
  if (!csv) throw std::runtime_error("spattn_bench: cannot write " + path);
}

void print_targets(std::ostream& out, const std::vector<CaseResult>& results,
                   const std::optional<Roofline>& roofline) {
  char line[96];
  out << "\nTargets (reported, not asserted):\n";
  for (const int64_t m : cache_sizes(results)) {
    std::snprintf(line, sizeof line, " M = %lld words:\n", static_cast<long long>(m));
    out << line;
    print_targets_at(out, results, roofline, m);
  }
}

}  // namespace spattn::bench
