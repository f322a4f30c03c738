// The planner: exact predictions of flash and small_cache (dense or over a mask), the choice,
// the bound, the switch M.
#include <spattn/plan.hpp>

#include "mask/mask_cache.hpp"
#include "schedules/common/arithmetic.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "plan/flash_tile_choice.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>
#include <vector>

namespace spattn {

namespace {

schedules::HeadShape head_shape(const bounds::DenseShape& shape) {
  return {shape.seqlen_q, shape.seqlen_k, shape.head_dim,
          shape.head_dim_v > 0 ? shape.head_dim_v : shape.head_dim};
}

std::string matmul_tiles_text(const char* name, const schedules::MatmulTiles& tiles) {
  std::ostringstream out;
  out << name << ' ' << tiles.tile_m << 'x' << tiles.tile_n << 'x' << tiles.tile_k;
  return out.str();
}

// A feasible prediction's flops and its time price (plan.hpp, time_rates()): a rate per word +
// flops + a rate per pair of a partial tile (flash, dense small_cache; the density-adaptive
// small_cache prices its work instead).
void set_flops(AlgorithmCost& cost, int64_t flops, int64_t partial_pairs = 0) {
  cost.flops = flops;
  cost.partial_pairs = partial_pairs;
  const TimeRates& rates = time_rates();
  cost.time_price = schedules::saturated_price(rates.word * static_cast<double>(cost.total()) + static_cast<double>(flops) +
                                               rates.flash_partial_pair * static_cast<double>(partial_pairs));
}

AlgorithmCost small_cache_cost(const schedules::HeadShape& shape, int64_t cache_words, Pass pass) {
  AlgorithmCost cost;
  cost.min_cache_words = schedules::small_cache_min_cache_words(shape, pass);
  cost.feasible = cache_words >= cost.min_cache_words;
  if (!cost.feasible) return cost;
  const auto tiles = schedules::small_cache_tiles(shape, cache_words, pass);
  const auto io = pass == Pass::forward ? schedules::predict_small_cache_forward(shape, tiles)
                                        : schedules::predict_small_cache_backward(shape, tiles);
  cost.reads = io.reads;
  cost.writes = io.writes;
  set_flops(cost, schedules::small_cache_flops(shape, shape.seqlen_q * shape.seqlen_k, pass));
  if (pass == Pass::forward) {
    cost.tiles = matmul_tiles_text("S", tiles.scores) + ", " + matmul_tiles_text("O", tiles.output);
  } else {
    cost.tiles = matmul_tiles_text("P", tiles.scores) + ", " + matmul_tiles_text("dS", tiles.d_scores) +
                 ", " + matmul_tiles_text("dQ", tiles.dq) + ", " + matmul_tiles_text("dK", tiles.dk) +
                 ", " + matmul_tiles_text("dV", tiles.dv);
  }
  return cost;
}

// Dense (mask == nullptr) or block-sparse flash: the same schedule, the mask re-blocked at its
// tiles (cached in the Mask). A mask's tiles follow the objective (flash_tile_choice.hpp).
AlgorithmCost flash_cost(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words,
                         Pass pass, PlanObjective objective) {
  AlgorithmCost cost;
  const auto masking = mask != nullptr ? schedules::FlashMasking::block_sparse : schedules::FlashMasking::dense;
  cost.min_cache_words = schedules::flash_min_cache_words(shape, pass, masking);
  cost.feasible = cache_words >= cost.min_cache_words;
  if (!cost.feasible) return cost;
  const auto tiles = mask != nullptr
                         ? mask->cache().flash_tiles(*mask, shape, cache_words, pass, objective)
                         : schedules::flash_tiles(shape, cache_words, pass);
  const auto flash_mask = mask != nullptr ? mask->cache().flash(*mask, tiles, pass) : nullptr;
  const auto words = pass == Pass::forward
                         ? schedules::predict_flash_forward_words(shape, tiles, flash_mask.get())
                         : schedules::predict_flash_backward_words(shape, tiles, flash_mask.get());
  cost.reads = words.total().reads;
  cost.writes = words.total().writes;
  cost.index_words = words.indices.total();
  // Partial tiles also apply their mask bits, pair by pair (plan.hpp).
  set_flops(cost, schedules::flash_flops(shape, flash_mask.get(), pass),
            schedules::flash_partial_pairs(flash_mask.get(), pass));
  std::ostringstream text;
  text << "block_q " << tiles.block_q << ", block_k " << tiles.block_k;
  if (pass == Pass::backward) {
    text << "; dK/dV pass block_k " << tiles.dkdv_block_k << ", block_q " << tiles.dkdv_block_q;
  }
  if (flash_mask) text << "; " << flash_mask->query_rows.num_stored() << " stored tiles";
  cost.tiles = text.str();
  return cost;
}

std::string sweep_text(const char* name, const schedules::SparseSweepTiles& tiles) {
  std::ostringstream out;
  out << name << ' ' << tiles.block_rows << 'x' << tiles.block_cols << 'x' << tiles.chunk;
  return out.str();
}

AlgorithmCost masked_small_cache_cost(const schedules::HeadShape& shape, const Mask& mask,
                                      int64_t cache_words, Pass pass, PlanObjective objective) {
  AlgorithmCost cost;
  cost.min_cache_words = schedules::sparse_small_cache_min_cache_words(pass);
  cost.feasible = cache_words >= cost.min_cache_words;
  if (!cost.feasible) return cost;
  // From the mask's counts alone: the schedule's structure is built only if small_cache runs.
  const auto counts = mask.cache().small_cache_counts(mask);
  const auto tiles = mask.cache().small_cache_tiles(mask, shape, cache_words, pass, objective);
  const auto io = pass == Pass::forward
                      ? schedules::predict_sparse_small_cache_forward(shape, *counts, tiles)
                      : schedules::predict_sparse_small_cache_backward(shape, *counts, tiles);
  cost.reads = io.total().reads;
  cost.writes = io.total().writes;
  cost.index_words = io.indices.total();
  const auto work = schedules::estimate_sparse_small_cache_work(shape, *counts, tiles);
  cost.flops = work.flops;
  cost.entry_visits = work.entry_visits;
  cost.walk_steps = work.walk_steps;
  cost.time_price = schedules::sparse_small_cache_time_price(cost.total(), work);
  cost.tiles = pass == Pass::forward
                   ? sweep_text("S", tiles.scores) + ", " + sweep_text("O", tiles.output)
                   : sweep_text("P", tiles.probs) + ", " + sweep_text("dS", tiles.d_scores) + ", " +
                         sweep_text("dQ", tiles.dq) + ", " + sweep_text("dK", tiles.dk) + ", " +
                         sweep_text("dV", tiles.dv);
  return cost;
}

struct Costs {
  AlgorithmCost flash;
  AlgorithmCost small_cache;
};

// Both algorithms' predictions at M; mask == nullptr is the dense (full) problem.
Costs costs_at(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words, Pass pass,
               PlanObjective objective) {
  if (mask == nullptr) {
    return {flash_cost(shape, nullptr, cache_words, pass, objective),
            small_cache_cost(shape, cache_words, pass)};
  }
  // A mask's predictions walk its structure: cached in the mask per (d, d_v, M, pass, objective).
  const detail::MaskCache::CostKey key{shape.head_dim, shape.head_dim_v, cache_words, static_cast<int>(pass),
                                       static_cast<int>(objective)};
  detail::MaskCache::Costs cached;
  if (mask->cache().find_costs(key, cached)) return {cached.first, cached.second};
  Costs costs;
  costs.small_cache = masked_small_cache_cost(shape, *mask, cache_words, pass, objective);
  costs.flash = flash_cost(shape, mask, cache_words, pass, objective);
  mask->cache().store_costs(key, {costs.flash, costs.small_cache});
  return costs;
}

// Positive when auto prefers small_cache over flash (both feasible), negative when flash, 0 on a
// tie (flash): the predicted words, or under the time objective over a mask the time prices.
int64_t choice_margin(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                      PlanObjective objective) {
  if (!masked || objective == PlanObjective::words) return flash.total() - small_cache.total();
  return flash.time_price - small_cache.time_price;
}

// choice_margin at M (both must be feasible there).
int64_t cost_difference(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words,
                        Pass pass, PlanObjective objective) {
  const Costs costs = costs_at(shape, mask, cache_words, pass, objective);
  return choice_margin(costs.flash, costs.small_cache, mask != nullptr, objective);
}

// Every M at which auto's choice (the sign of choice_margin) changes, searching powers of two from the
// smallest M both run with up to 16 (seqlen x head_dim) for a bracket and then bisecting.
std::vector<int64_t> find_switches(const schedules::HeadShape& shape, const Mask* mask, Pass pass,
                                   PlanObjective objective) {
  const Costs minimum = costs_at(shape, mask, 1, pass, objective);
  const int64_t low = std::max(minimum.flash.min_cache_words, minimum.small_cache.min_cache_words);
  const int64_t high = 16 * std::max<int64_t>(1, std::max(shape.seqlen_q, shape.seqlen_k) *
                                                     std::max(shape.head_dim, shape.head_dim_v));
  auto sign = [&](int64_t m) {
    const int64_t diff = cost_difference(shape, mask, m, pass, objective);
    return diff > 0 ? 1 : (diff < 0 ? -1 : 0);
  };
  std::vector<int64_t> switches;
  int64_t previous = low;
  int previous_sign = sign(low);
  for (int64_t m = low; m <= high;) {
    const int64_t next = std::min(high, m * 2);
    if (next == m) break;
    const int next_sign = sign(next);
    if (next_sign != previous_sign && previous_sign != 0) {
      int64_t lo = previous;
      int64_t hi = next;  // sign(lo) = previous_sign, sign(hi) differs
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        (sign(mid) == previous_sign ? lo : hi) = mid;
      }
      switches.push_back(hi);
    }
    previous = next;
    previous_sign = next_sign;
    m = next;
  }
  return switches;
}

// The dense problem's switches depend on the shape and pass only, and every dense plan reports
// them: found once per (seqlen_q, seqlen_k, d, d_v, pass) and kept (a bounded, locked table).
std::vector<int64_t> dense_switches(const schedules::HeadShape& shape, Pass pass) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int>;
  static std::mutex mutex;
  static std::map<Key, std::vector<int64_t>> table;
  const Key key{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v, static_cast<int>(pass)};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = table.find(key);
    if (found != table.end()) return found->second;
  }
  std::vector<int64_t> switches = find_switches(shape, nullptr, pass, PlanObjective::words);  // outside the lock
  std::lock_guard<std::mutex> lock(mutex);
  if (table.size() >= 4096) table.clear();  // many distinct shapes: start over rather than grow
  table.emplace(key, switches);
  return switches;
}

// The switch nearest to cache_words (the smaller on a tie); 0 when there is none.
int64_t nearest_switch(const std::vector<int64_t>& switches, int64_t cache_words) {
  int64_t best = 0;
  int64_t best_distance = INT64_MAX;
  for (int64_t m : switches) {
    const int64_t distance = m > cache_words ? m - cache_words : cache_words - m;
    if (distance < best_distance) {
      best = m;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::automatic: return "auto";
    case Algorithm::reference: return "reference";
    case Algorithm::flash: return "flash";
    case Algorithm::small_cache: return "small_cache";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::reference, Algorithm::flash,
                      Algorithm::small_cache}) {
    if (name == algorithm_name(a)) return a;
  }
  fail("algorithm: '", name, "' is not one of auto, reference, flash, small_cache");
}

const char* pass_name(Pass pass) { return pass == Pass::forward ? "forward" : "backward"; }

const char* plan_objective_name(PlanObjective objective) {
  return objective == PlanObjective::words ? "words" : "time";
}

PlanObjective parse_plan_objective(const std::string& name) {
  if (name == "words") return PlanObjective::words;
  if (name == "time") return PlanObjective::time;
  fail("tile objective: '", name, "' is not one of words, time");
}

Algorithm choose_algorithm(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                           PlanObjective objective) {
  if (!flash.feasible || !small_cache.feasible) return flash.feasible ? Algorithm::flash : Algorithm::small_cache;
  return choice_margin(flash, small_cache, masked, objective) > 0 ? Algorithm::small_cache : Algorithm::flash;
}

Plan plan_dense(const bounds::DenseShape& shape, int64_t cache_words, Pass pass,
                Algorithm requested, int64_t num_heads) {
  return plan_attention(shape, Mask::full(std::max<int64_t>(shape.seqlen_q, 0), std::max<int64_t>(shape.seqlen_k, 0)),
                        cache_words, pass, requested, num_heads, true);
}

Plan plan_attention(const bounds::DenseShape& shape, const Mask& mask, int64_t cache_words,
                    Pass pass, Algorithm requested, int64_t num_heads, bool search_switch,
                    PlanObjective objective) {
  if (cache_words < 1) fail("plan: cache size M = ", cache_words, " words must be >= 1");
  if (num_heads < 0) fail("plan: num_heads = ", num_heads, " must be >= 0");
  if (shape.seqlen_q < 0 || shape.seqlen_k < 0 || shape.head_dim < 0 || shape.head_dim_v < 0) {
    fail("plan: seqlen_q = ", shape.seqlen_q, ", seqlen_k = ", shape.seqlen_k, ", head_dim = ",
         shape.head_dim, ", head_dim_v = ", shape.head_dim_v, " must all be >= 0");
  }
  if (requested == Algorithm::reference) {
    fail("plan: the reference is not a schedule; it has no plan (choose auto, flash or small_cache)");
  }
  if (mask.seqlen_q() != shape.seqlen_q || mask.seqlen_k() != shape.seqlen_k) {
    fail("plan: the mask is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", the problem ",
         shape.seqlen_q, " x ", shape.seqlen_k);
  }
  const schedules::HeadShape head = head_shape(shape);
  const Mask* sparse_mask = mask.is_full() ? nullptr : &mask;
  Plan plan;
  plan.pass = pass;
  plan.shape = shape;
  plan.shape.head_dim_v = head.head_dim_v;
  plan.num_heads = num_heads;
  plan.cache_words = cache_words;
  plan.requested = requested;
  plan.objective = objective;
  const Costs costs = costs_at(head, sparse_mask, cache_words, pass, objective);
  plan.flash = costs.flash;
  plan.small_cache = costs.small_cache;

  if (requested == Algorithm::flash && !plan.flash.feasible) {
    fail("plan: flash ", pass_name(pass), " needs M >= ", plan.flash.min_cache_words,
         " words for head_dim ", head.head_dim, ", head_dim_v ", head.head_dim_v, "; got M = ",
         cache_words);
  }
  if (requested == Algorithm::small_cache && !plan.small_cache.feasible) {
    fail("plan: small_cache ", pass_name(pass), " needs M >= ", plan.small_cache.min_cache_words,
         " words; got M = ", cache_words);
  }
  if (!plan.flash.feasible && !plan.small_cache.feasible) {
    fail("plan: M = ", cache_words, " words fits neither flash (needs ", plan.flash.min_cache_words,
         ") nor small_cache (needs ", plan.small_cache.min_cache_words, ")");
  }
  plan.algorithm = requested == Algorithm::automatic
                       ? choose_algorithm(plan.flash, plan.small_cache, sparse_mask != nullptr, objective)
                       : requested;
  const AlgorithmCost& chosen = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  plan.reads = chosen.reads * num_heads;
  plan.writes = chosen.writes * num_heads;

  const double heads = static_cast<double>(num_heads);
  const auto cache = static_cast<double>(cache_words);
  plan.masked = sparse_mask != nullptr;
  plan.z_qk = mask.nnz();
  plan.z_input = 0.5 * static_cast<double>(shape.seqlen_q + shape.seqlen_k) * static_cast<double>(shape.head_dim);
  if (plan.masked) {
    plan.bound = bounds::sparse(plan.z_input, static_cast<double>(plan.z_qk), cache);
  } else {
    plan.bound = pass == Pass::forward ? bounds::dense_forward(plan.shape, cache)
                                       : bounds::dense_backward(plan.shape, cache);
  }
  plan.theoretical_switch = plan.bound.crossover_m;
  plan.bound.large_cache *= heads;
  plan.bound.small_cache *= heads;
  plan.bound.value *= heads;
  plan.compulsory = heads * (pass == Pass::forward ? bounds::compulsory_forward(plan.shape)
                                                   : bounds::compulsory_backward(plan.shape));
  const double total = static_cast<double>(plan.total());
  plan.ratio_to_bound = plan.bound.value > 0.0 ? total / plan.bound.value : 0.0;
  plan.ratio_to_flash = plan.flash.feasible && plan.flash.total() > 0
                            ? total / (heads * static_cast<double>(plan.flash.total()))
                            : 0.0;
  plan.beats_worst_case = plan.masked && plan.ratio_to_bound < 1.0;
  if (search_switch || !plan.masked) {
    const auto switches =
        sparse_mask != nullptr ? find_switches(head, sparse_mask, pass, objective) : dense_switches(head, pass);
    plan.switch_cache_words = nearest_switch(switches, cache_words);
    plan.switch_searched = true;
  }
  return plan;
}

std::string Plan::to_string() const {
  std::ostringstream out;
  auto cost_line = [&](const char* name, const AlgorithmCost& cost) {
    out << "  " << name << ": ";
    if (!cost.feasible) {
      out << "infeasible (needs M >= " << cost.min_cache_words << ")\n";
    } else {
      const int64_t repeats = num_heads / std::max<int64_t>(cost_heads, 1);
      out << cost.total() * repeats << " words (" << cost.reads * repeats << " reads, "
          << cost.writes * repeats << " writes)";
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
