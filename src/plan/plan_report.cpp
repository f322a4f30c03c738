// A plan's report (Plan::to_string) and its equality: every reported figure and the run.
#include <spattn/plan.hpp>

#include "plan/planned_run.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <sstream>
#include <string>

namespace spattn {

namespace {

template <typename Shape>  // bounds::DenseShape, schedules::HeadShape
bool same_shape(const Shape& a, const Shape& b) {
  return a.seqlen_q == b.seqlen_q && a.seqlen_k == b.seqlen_k && a.head_dim == b.head_dim &&
         a.head_dim_v == b.head_dim_v;
}

bool same_cost(const AlgorithmCost& a, const AlgorithmCost& b) {
  return a.feasible == b.feasible && a.min_cache_words == b.min_cache_words && a.max_entries == b.max_entries &&
         a.too_large == b.too_large && a.reads == b.reads &&
         a.writes == b.writes && a.index_words == b.index_words && a.tiles == b.tiles && a.flops == b.flops &&
         a.time_price == b.time_price && a.partial_pairs == b.partial_pairs && a.entry_visits == b.entry_visits &&
         a.walk_steps == b.walk_steps && a.lines_predicted == b.lines_predicted && a.read_lines == b.read_lines &&
         a.write_lines == b.write_lines;
}

bool same_bound(const bounds::Bound& a, const bounds::Bound& b) {
  return a.value == b.value && a.large_cache == b.large_cache && a.small_cache == b.small_cache &&
         a.crossover_m == b.crossover_m && a.branch == b.branch;
}

bool same_run(const std::shared_ptr<const detail::PlannedRun>& a, const std::shared_ptr<const detail::PlannedRun>& b) {
  if (!a || !b) return !a && !b;
  return *a == *b;
}

// Where the counted lines are a real cache's: the simulator check (tests/cache_sim, an LRU cache of
// 2M words with 64-byte lines, so measured at L = 16) holds them within [0.8, 1.25] of its misses
// from M = 2 L^2 when a head row is at least 4 lines (head_dim >= 4 L), and from 32 L^2 for rows
// of 1 to 3 lines (measured at head_dim 16, 32, 64 and 128). Below that the call's own state
// (stack, the kernels' constants) beside the tiles outgrows the cache's headroom, and the dK/dV
// pass's 1-row query tiles read LSE and D a word a line (docs/io_model.md, "The line size as a
// parameter"). Rows shorter than a line are not checked.
void report_line_domain(std::ostream& out, int64_t line_words, int64_t head_dim, int64_t cache_words) {
  const int64_t tall = 2 * line_words * line_words;
  const int64_t short_rows = 32 * line_words * line_words;
  if (cache_words < tall) {
    out << "    below 2 L^2 = " << tall
        << " words: an LRU cache of 2M missed up to about 5x the lines counted here, the call's own state "
           "beside the tiles (docs/io_model.md, \"Against a cache simulator\")\n";
  } else if (head_dim < line_words) {
    out << "    head_dim " << head_dim << " below L = " << line_words
        << ": the lines counted here are not checked against a real cache for rows shorter than a line\n";
  } else if (head_dim < 4 * line_words && cache_words < short_rows) {
    out << "    head_dim " << head_dim << " below 4 L = " << 4 * line_words << " and M below 32 L^2 = " << short_rows
        << " words: an LRU cache of 2M missed 0.7x to 25x the lines counted here (docs/io_model.md, "
           "\"The line size as a parameter\")\n";
  }
}

}  // namespace

namespace detail {

// The same prepared mask, or two full masks of one shape (a full mask prepares nothing).
bool same_mask(const Mask& a, const Mask& b) {
  if (a.is_full() && b.is_full()) return a.seqlen_q() == b.seqlen_q() && a.seqlen_k() == b.seqlen_k();
  return &detail::cache_of(a) == &detail::cache_of(b);
}

bool operator==(const PlannedGroup& a, const PlannedGroup& b) {
  return same_mask(a.mask, b.mask) && a.heads == b.heads && a.algorithm == b.algorithm &&
         a.flash_tiles == b.flash_tiles && a.flash_mask == b.flash_mask &&
         a.small_cache_tiles == b.small_cache_tiles && a.sparse_small_cache_tiles == b.sparse_small_cache_tiles &&
         a.sparse_small_cache_mask == b.sparse_small_cache_mask;
}

bool operator==(const PlannedRun& a, const PlannedRun& b) {
  return a.pass == b.pass && a.groups == b.groups && a.dk_sum == b.dk_sum &&
         a.dv_sum == b.dv_sum;
}

}  // namespace detail

bool operator==(const Plan& a, const Plan& b) {
  return a.pass == b.pass && same_shape(a.shape, b.shape) && a.num_heads == b.num_heads && a.cost_heads == b.cost_heads &&
         a.cache_words == b.cache_words && a.requested == b.requested && a.algorithm == b.algorithm &&
         a.objective == b.objective && same_cost(a.flash, b.flash) && same_cost(a.small_cache, b.small_cache) &&
         a.reads == b.reads && a.writes == b.writes && a.line_words == b.line_words &&
         a.lines_predicted == b.lines_predicted && a.read_lines == b.read_lines && a.write_lines == b.write_lines &&
         a.kv_sum_reads == b.kv_sum_reads &&
         a.kv_sum_writes == b.kv_sum_writes && same_bound(a.bound, b.bound) && a.compulsory == b.compulsory &&
         a.ratio_to_bound == b.ratio_to_bound && a.ratio_to_flash == b.ratio_to_flash &&
         a.switch_cache_words == b.switch_cache_words && a.switches == b.switches &&
         a.switch_searched == b.switch_searched &&
         a.sparse_inputs == b.sparse_inputs && a.head_masks == b.head_masks && a.masked == b.masked &&
         a.z_qk == b.z_qk && a.z_input == b.z_input && a.theoretical_switch == b.theoretical_switch &&
         a.beats_worst_case == b.beats_worst_case && same_run(a.run, b.run);
}

bool operator!=(const Plan& a, const Plan& b) { return !(a == b); }

std::string Plan::to_string() const {
  std::ostringstream out;
  auto cost_line = [&](const char* name, const AlgorithmCost& cost) {
    out << "  " << name << ": ";
    if (cost.too_large) {
      out << "infeasible (materializes a value per attended pair: at most " << cost.max_entries << ")\n";
    } else if (!cost.feasible) {
      out << "infeasible (needs M >= " << cost.min_cache_words << ")\n";
    } else {
      const int64_t repeats = num_heads / std::max<int64_t>(cost_heads, 1);
      out << cost.total() * repeats << " words (" << cost.reads * repeats << " reads, "
          << cost.writes * repeats << " writes)";
      if (cost.lines_predicted) out << ", " << cost.total_lines() * repeats << " lines";
      if (cost.flops > 0) out << ", " << static_cast<double>(cost.flops) * static_cast<double>(repeats) << " flops";
      if (masked && objective == PlanObjective::time) {
        const double r = static_cast<double>(repeats);
        out << ", time price " << static_cast<double>(cost.time_price) * r;
        if (cost.partial_pairs > 0) out << " (" << static_cast<double>(cost.partial_pairs) * r << " partial-tile pairs)";
        if (cost.entry_visits > 0 || cost.walk_steps > 0) {
          out << " (" << static_cast<double>(cost.entry_visits) * r << " entry visits, "
              << static_cast<double>(cost.walk_steps) * r << " walk steps)";
        }
      }
      out << "; tiles " << cost.tiles << '\n';
    }
  };
  out << "plan (" << pass_name(pass) << "): seqlen_q " << shape.seqlen_q << ", seqlen_k "
      << shape.seqlen_k << ", head_dim " << shape.head_dim << ", head_dim_v " << shape.head_dim_v
      << ", heads " << num_heads << ", M " << cache_words << " words\n";
  {
    // Twice the words of the whole head (Q, K, V, O, dO, dQ, dK, dV, the row statistics and every
    // score) leaves room for every algorithm's index words too: past it no tile can grow, and a
    // larger M plans the same tiles and words (only the bound, a function of M, still moves).
    const double whole = 2.0 * (static_cast<double>(shape.seqlen_q) * static_cast<double>(2 * shape.head_dim + 2 * shape.head_dim_v + 4) +
                                static_cast<double>(shape.seqlen_k) * static_cast<double>(2 * shape.head_dim + 2 * shape.head_dim_v) +
                                static_cast<double>(shape.seqlen_q) * static_cast<double>(shape.seqlen_k));
    if (static_cast<double>(cache_words) > whole) {
      out << "  M exceeds " << whole << " words, twice the whole head (inputs, outputs, statistics, scores): "
          << "a larger M plans the same tiles\n";
    }
  }
  if (masked) {
    const double area = static_cast<double>(shape.seqlen_q) * static_cast<double>(shape.seqlen_k) *
                        static_cast<double>(std::max<int64_t>(cost_heads, 1));
    // Several cost heads: one mask per head, or (sparse inputs) every head's own nonzeros with one
    // mask or one per head, so Z_QK and Z_input are the heads' sums.
    const std::string over = cost_heads > 1 ? " over " + std::to_string(cost_heads) + " heads" : std::string();
    out << "  mask" << (head_masks ? "s (one per head)" : "") << ": " << z_qk
        << " attended pairs" << over << " (density " << static_cast<double>(z_qk) / area
        << "); Z_input = (nnz(Q) + nnz(K)) / 2 = " << z_input
        << (cost_heads > 1 && sparse_inputs ? " summed" + over : std::string()) << "\n";
  }
  out << "  algorithm: " << algorithm_name(algorithm);
  if (requested != Algorithm::automatic) {
    out << " (requested)";
  } else if (masked && objective == PlanObjective::time) {
    out << " (chosen for time: the smaller time price)";
  } else {
    out << " (chosen: smaller predicted I/O)";
  }
  out << '\n';
  out << "  predicted I/O: " << total() << " words (" << reads << " reads, " << writes
      << " writes)\n";
  if (lines_predicted) {
    out << "  predicted lines of " << line_words << " words: " << read_lines + write_lines << " ("
        << read_lines << " reads, " << write_lines << " writes)\n";
    if (line_words > 1) report_line_domain(out, line_words, std::min(shape.head_dim, shape.head_dim_v), cache_words);
  }
  if (kv_sum_reads + kv_sum_writes > 0) {
    out << "  of which grouped-query dK/dV sums: " << kv_sum_reads << " reads, " << kv_sum_writes
        << " writes\n";
  }
  cost_line("flash", flash);
  if (masked && objective == PlanObjective::time) {
    out << "    (tiles chosen for time; price in flash flops: " << time_rates().word << " per word, flops, "
        << time_rates().flash_partial_pair << " per pair of a partial tile)\n";
  }
  cost_line("small_cache", small_cache);
  if (masked && objective == PlanObjective::time) {
    const TimeRates& rates = time_rates();
    out << "    (tiles chosen for time; price: " << rates.word << " per word, " << rates.small_cache_entry_visit
        << " per entry visit, " << rates.small_cache_walk_step << " per walk step, " << rates.small_cache_flop
        << " per flop)\n";
    out << "  time rates: " << rates.source << "\n";
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "  lower bound%s: %.4g words (%s branch; large-cache %.4g, small-cache %.4g; "
                "branches cross at M = %.0f)\n",
                masked ? " (sparse, worst case over masks)" : "", bound.value,
                bounds::branch_name(bound.branch), bound.large_cache, bound.small_cache,
                bound.crossover_m);
  out << line;
  std::snprintf(line, sizeof line,
                "  ratio to bound: %.3g; ratio to flash: %.3g; compulsory I/O: %.4g words\n",
                ratio_to_bound, ratio_to_flash, compulsory);
  out << line;
  if (lines_predicted) {
    // A line carries at most line_words words, so any schedule moving W words moves at least
    // W / line_words lines: the word bounds carry over divided by L (docs/io_model.md).
    const double per_line = static_cast<double>(line_words);
    std::snprintf(line, sizeof line,
                  "  in lines: lower bound %.4g, compulsory %.4g (the words / %lld); ratio to bound %.3g\n",
                  bound.value / per_line, compulsory / per_line, static_cast<long long>(line_words),
                  bound.value > 0.0 ? static_cast<double>(read_lines + write_lines) * per_line / bound.value : 0.0);
    out << line;
  }
  if (beats_worst_case) {
    out << "  this mask is structured: it moves fewer words than the worst-case bound allows for an "
           "unstructured mask of the same Z_QK (expected, not a violation)\n";
  }
  if (switch_cache_words > 0) {
    std::snprintf(line, sizeof line,
                  "  switch: auto changes algorithm at M = %lld words (%.3g times the theoretical "
                  "%s = %.0f)\n",
                  static_cast<long long>(switch_cache_words),
                  theoretical_switch > 0 ? static_cast<double>(switch_cache_words) / theoretical_switch : 0.0,
                  masked ? "Z_input^2 / Z_QK" : "d^2", theoretical_switch);
    out << line;
    if (switches.size() > 1) {
      out << "  every switch: M =";
      for (size_t i = 0; i < switches.size(); ++i) out << (i ? ", " : " ") << switches[i];
      out << " words (the choice alternates between them)\n";
    }
  } else if (head_masks) {
    out << "  switch: not searched for per-head masks (each mask has its own)\n";
  } else if (!switch_searched) {
    // Only dense-input plans can search it (sparse_inputs.hpp's plan never does).
    out << (sparse_inputs
                ? "  switch: not searched for sparse inputs"
                : "  switch: not searched (spattn plan --switch searches it for dense inputs)")
        << "; theory puts it at Z_input^2 / Z_QK = " << theoretical_switch << " words"
        << (cost_heads > 1 ? " (for the first head; each head has its own)" : "") << "\n";
  } else {
    out << "  switch: none in range (one algorithm is cheaper at every M)\n";
  }
  return out.str();
}

}  // namespace spattn
