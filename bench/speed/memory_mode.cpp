#include "memory_mode.hpp"

#include "speed_cases.hpp"

#include "api/checks.hpp"
#include "plan/dense_flash_tiles.hpp"
#include "schedules/flash/flash_heads.hpp"
#include "schedules/flash/flash_mask.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/resource.h>

namespace spattn::bench {

namespace {

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Forward then backward through the flash schedule directly: tiles for M, the mask re-blocked
// once per pass, one head. Returns {forward s, backward s}.
struct ScheduleRun {
  schedules::FlashTiles forward_tiles, backward_tiles;
  schedules::FlashMask forward_mask, backward_mask;
  std::vector<float> q, k, v, o, lse, d_o, delta, dq, dk, dv;
};

std::pair<double, double> run_schedule(ScheduleRun& r, int64_t n, int64_t d, int threads,
                                       int64_t cache_words) {
  using In = io::SlowMatrix<const float>;
  using Out = io::SlowMatrix<float>;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  schedules::FlashTeam team;
  team.threads = api_detail::resolve_threads("spattn_bench", threads);
  team.cache_words = cache_words;
  const std::vector<schedules::HeadForward> forward{{In::dense(r.q.data(), n, d), In::dense(r.k.data(), n, d),
                                                     In::dense(r.v.data(), n, d), Out::dense(r.o.data(), n, d),
                                                     Out::dense(r.lse.data(), n, 1), scale}};
  const std::vector<schedules::HeadBackward> backward{
      {In::dense(r.q.data(), n, d), In::dense(r.k.data(), n, d), In::dense(r.v.data(), n, d),
       In::dense(r.o.data(), n, d), In::dense(r.lse.data(), n, 1), In::dense(r.d_o.data(), n, d),
       Out::dense(r.delta.data(), n, 1), Out::dense(r.dq.data(), n, d), Out::dense(r.dk.data(), n, d),
       Out::dense(r.dv.data(), n, d), scale}};
  auto start = std::chrono::steady_clock::now();
  schedules::flash_forward_heads(team, forward, r.forward_tiles, &r.forward_mask);
  const double forward_s = seconds_since(start);
  start = std::chrono::steady_clock::now();
  schedules::flash_backward_heads(team, backward, r.backward_tiles, &r.backward_mask);
  return {forward_s, seconds_since(start)};
}

}  // namespace

void run_memory_mode(std::ostream& out, const MemorySettings& settings) {
  char line[256];
  out << (settings.schedule_only ? "the flash schedule itself (tile lists built once, no planner; words not counted)\n"
                                 : "the public API, algorithm flash; the words counted by a third fwd + bwd\n");
  std::snprintf(line, sizeof line, "peak RSS before any case: %.1f MiB\n", peak_rss_mib());
  out << line;
  // The first fwd+bwd of a mask builds what the API caches in it (the flash tile lists, the
  // planner's structures); the second shows the steady state.
  const std::string spec =
      settings.mask_spec.empty() ? "sliding_window:w=" + std::to_string(settings.window) : settings.mask_spec;
  out << "mask " << spec << "\n";
  std::snprintf(line, sizeof line, "%8s %4s %10s %14s %9s %9s %8s %11s %11s %11s %11s %12s %14s %12s\n", "n", "d",
                "form", "nnz", "mask MiB", "data MiB", "build s", "fwd cold s", "bwd cold s",
                "fwd warm s", "bwd warm s", "peak RSS MiB", "counted words", "index words");
  out << line;
  std::vector<int64_t> seqlens = settings.seqlens;
  std::sort(seqlens.begin(), seqlens.end());
  for (const int64_t n : seqlens) {
    auto start = std::chrono::steady_clock::now();
    const Mask mask = Mask::from_spec(spec, n, n);
    double forward_s[2], backward_s[2], build_s = 0.0;
    io::Traffic counted, counted_index;  // fwd + bwd words through the public API (a third, counted run)
    if (settings.schedule_only) {
      const int64_t d = settings.head_dim;
      const int64_t cache_words = settings.cache_words == 0 ? default_cache_words() : settings.cache_words;
      const schedules::HeadShape shape{n, n, d, d};
      ScheduleRun r;
      r.forward_tiles = schedules::flash_tiles(shape, cache_words, Pass::forward,
                                               schedules::FlashMasking::block_sparse);
      r.backward_tiles = schedules::flash_tiles(shape, cache_words, Pass::backward,
                                                schedules::FlashMasking::block_sparse);
      const auto build = [&](const schedules::FlashTiles& tiles, Pass pass) {  // from the mask's own form
        return mask.row_intervals() != nullptr ? schedules::build_flash_mask(*mask.row_intervals(), nullptr, n, n, tiles, pass)
                                           : schedules::build_flash_mask(mask.csr(), n, n, tiles, pass);
      };
      r.forward_mask = build(r.forward_tiles, Pass::forward);
      r.backward_mask = build(r.backward_tiles, Pass::backward);
      const auto size = static_cast<size_t>(n * d);
      for (auto* x : {&r.q, &r.k, &r.v, &r.d_o}) x->assign(size, 0.01f);
      for (auto* x : {&r.o, &r.dq, &r.dk, &r.dv}) x->assign(size, 0.0f);
      r.lse.assign(static_cast<size_t>(n), 0.0f);
      r.delta.assign(static_cast<size_t>(n), 0.0f);
      build_s = seconds_since(start);
      for (int run = 0; run < 2; ++run) {
        std::tie(forward_s[run], backward_s[run]) = run_schedule(r, n, d, settings.threads, cache_words);
      }
    } else {
      SpeedProblem problem(1, n, settings.head_dim, 7);
      build_s = seconds_since(start);
      AttentionOptions options;
      options.algorithm = Algorithm::flash;
      options.threads = settings.threads;
      options.cache_words = settings.cache_words;
      options.line_words = settings.line_words;
      for (int run = 0; run < 2; ++run) {
        start = std::chrono::steady_clock::now();
        problem.forward(mask, options);
        forward_s[run] = seconds_since(start);
        start = std::chrono::steady_clock::now();
        problem.backward(mask, options);
        backward_s[run] = seconds_since(start);
      }
      io::Ledger ledger(io::plan_line_words("spattn_bench --memory", settings.line_words, nullptr));
      options.ledger = &ledger;
      problem.forward(mask, options);
      problem.backward(mask, options);
      counted = ledger.total();
      counted_index = ledger.total(io::WordKind::index);
    }
    // What the mask holds in its own form (intervals for a window), after the runs.
    const double mask_mib = static_cast<double>(mask.memory_bytes()) / (1024.0 * 1024.0);
    // Q, K, V, dO, O, dQ, dK, dV (n x d each) and LSE (n), fp32.
    const double data_mib = static_cast<double>((8 * n * settings.head_dim + n) * 4) / (1024.0 * 1024.0);
    std::snprintf(line, sizeof line,
                  "%8lld %4lld %10s %14lld %9.1f %9.1f %8.2f %11.2f %11.2f %11.3f %11.3f %12.1f %14lld %12lld\n",
                  static_cast<long long>(n), static_cast<long long>(settings.head_dim),
                  form_name(mask.form()), static_cast<long long>(mask.nnz()), mask_mib,
                  data_mib, build_s, forward_s[0], backward_s[0], forward_s[1], backward_s[1],
                  peak_rss_mib(), static_cast<long long>(counted.reads + counted.writes),
                  static_cast<long long>(counted_index.reads + counted_index.writes));
    out << line;
    out.flush();
  }
}

}  // namespace spattn::bench
