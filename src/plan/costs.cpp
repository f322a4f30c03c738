// The planner's inner steps (costs.hpp): each algorithm's exact prediction with the tiles it
// runs, the switch M, and the typed group the chosen algorithm runs.
#include "plan/costs.hpp"

#include "mask/mask_cache.hpp"
#include "plan/dense_flash_tiles.hpp"
#include "plan/dense_small_cache_tiles.hpp"
#include "plan/flash_tile_choice.hpp"
#include "plan/memo_table.hpp"
#include "plan/price.hpp"
#include "plan/sparse_small_cache_tile_choice.hpp"
#include "schedules/flash/flash_backward_fused.hpp"
#include "schedules/flash/flash_flops.hpp"

#include <algorithm>
#include <sstream>
#include <tuple>
#include <utility>

namespace spattn::plan_detail {

schedules::HeadShape head_shape(const bounds::DenseShape& shape) {
  return {shape.seqlen_q, shape.seqlen_k, shape.head_dim,
          shape.head_dim_v > 0 ? shape.head_dim_v : shape.head_dim};
}

namespace {

// A head's counts are at most about seqlen_q seqlen_k (head_dim + head_dim_v + 4) words (flash with
// one-row query tiles reads every K, V row once per query row); past 2^62 the int64 ledger and
// predictions would overflow, so such a head is refused, by its sizes, before anything is counted.
void check_countable(const schedules::HeadShape& s) {
  const double words = static_cast<double>(s.seqlen_q) * static_cast<double>(s.seqlen_k) *
                       (static_cast<double>(s.head_dim) + static_cast<double>(s.head_dim_v) + 4.0);
  if (words > 0x1p62) {
    fail("plan: a head of seqlen_q ", s.seqlen_q, ", seqlen_k ", s.seqlen_k, ", head_dim ", s.head_dim,
         ", head_dim_v ", s.head_dim_v, " may move up to seqlen_q seqlen_k (head_dim + head_dim_v + 4) = ", words,
         " words, past the 2^62 that spattn's int64 counts hold");
  }
}

// A tile record's plan text (AlgorithmCost::tiles), from the record's own printing.
template <typename Record>
std::string tile_text(const Record& tiles) {
  std::ostringstream out;
  schedules::print_tile_list(out, tiles);
  return out.str();
}

// A feasible prediction's flops and its time price (plan.hpp, time_rates()): a rate per word +
// flops + a rate per pair of a partial tile (flash, dense small_cache; the density-adaptive
// small_cache prices its work instead). For a full mask the words priced are the words the
// predicted lines carry (lines x L, L the plan's line size): memory moves whole lines. Over a mask the words themselves,
// as the density-adaptive small_cache's price has them: its one-word moves touch a line each,
// lines the L1 and L2 serve, and priced in lines auto ran the slower algorithm more often
// (docs/results.md 2.4, "Words or lines over a mask"). Set the lines first.
enum class Priced : uint8_t { words, lines };
void set_flops(AlgorithmCost& cost, Priced priced, int64_t line_words, int64_t flops, int64_t partial_pairs = 0) {
  cost.flops = flops;
  cost.partial_pairs = partial_pairs;
  const TimeRates& rates = time_rates();
  const double words = priced == Priced::lines
                           ? static_cast<double>(cost.total_lines()) * static_cast<double>(line_words)
                           : static_cast<double>(cost.total());
  cost.time_price = saturated_price(rates.word * words + static_cast<double>(flops) +
                                               rates.flash_partial_pair * static_cast<double>(partial_pairs));
}

AlgorithmCost small_cache_cost(const schedules::HeadShape& shape, int64_t cache_words, int64_t line_words, Pass pass,
                              schedules::SmallCacheTiles& tiles) {
  AlgorithmCost cost;
  cost.min_cache_words = schedules::small_cache_min_cache_words(shape, pass);
  cost.feasible = cache_words >= cost.min_cache_words;
  if (!cost.feasible) return cost;
  tiles = schedules::small_cache_tiles(shape, cache_words, pass, line_words);
  const auto io = pass == Pass::forward ? schedules::predict_small_cache_forward(shape, tiles)
                                        : schedules::predict_small_cache_backward(shape, tiles);
  cost.reads = io.reads;
  cost.writes = io.writes;
  const auto lines = pass == Pass::forward
                         ? schedules::predict_small_cache_forward_lines(shape, tiles, tiles.line_words)
                         : schedules::predict_small_cache_backward_lines(shape, tiles, tiles.line_words);
  cost.lines_predicted = true;
  cost.read_lines = lines.reads;
  cost.write_lines = lines.writes;
  set_flops(cost, Priced::lines, line_words, schedules::small_cache_flops(shape, shape.seqlen_q * shape.seqlen_k, pass));
  cost.tiles = tile_text(tiles);
  return cost;
}

// The rows' first and last keys, from the mask's own form.
schedules::flash_detail::MaskSpans spans_of(const Mask& mask) {
  return mask.row_intervals() != nullptr ? schedules::flash_detail::mask_spans(*mask.row_intervals())
                                         : detail::with_element_csr(mask, [](const auto& csr) {
                                             return schedules::flash_detail::mask_spans(csr);
                                           });
}

// Whether `a` is the cheaper of two feasible flash predictions for `objective` (choice_margin's
// order: time prices, or lines then words); false on a tie.
bool cheaper(const AlgorithmCost& a, const AlgorithmCost& b, PlanObjective objective) {
  if (objective == PlanObjective::time) return a.time_price < b.time_price;
  if (a.total_lines() != b.total_lines()) return a.total_lines() < b.total_lines();
  return a.total() < b.total();
}

AlgorithmCost priced_flash(const schedules::HeadShape& shape, const Mask* mask, int64_t line_words, Pass pass,
                           const schedules::FlashTiles& tiles);

// Dense (mask == nullptr) or block-sparse flash: the same schedule, the mask re-blocked at its
// tiles (cached in the Mask). A mask's tiles follow the objective (flash_tile_choice.hpp). A
// backward also prices dQ in the dK/dV pass (FlashTiles::dq_in_dkdv) and takes it where it is
// cheaper for the objective.
AlgorithmCost flash_cost(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words,
                         int64_t line_words, Pass pass, PlanObjective objective,
                         schedules::FlashTiles& tiles) {
  AlgorithmCost cost;
  const auto masking = mask != nullptr ? schedules::FlashMasking::block_sparse : schedules::FlashMasking::dense;
  cost.min_cache_words = schedules::flash_min_cache_words(shape, pass, masking);
  cost.feasible = cache_words >= cost.min_cache_words;
  if (!cost.feasible) return cost;
  const auto spans = mask != nullptr ? spans_of(*mask) : schedules::flash_detail::MaskSpans{};
  tiles = mask != nullptr ? schedules::masked_flash_tiles(shape, cache_words, pass, spans, objective)
                          : schedules::flash_tiles(shape, cache_words, pass, schedules::FlashMasking::dense, objective);
  AlgorithmCost priced = priced_flash(shape, mask, line_words, pass, tiles);
  if (pass == Pass::backward &&
      cache_words >= schedules::flash_min_cache_words(shape, pass, masking, true)) {
    const schedules::FlashTiles fused =
        mask != nullptr ? schedules::masked_fused_flash_tiles(shape, cache_words, spans, objective)
                        : schedules::fused_flash_tiles(shape, cache_words, schedules::FlashMasking::dense, objective);
    // Over a mask whose key tiles' lists jump about, the workers would wait on one another.
    const bool flows = mask == nullptr || schedules::flash_detail::key_spans_ascend(
                                              detail::cache_of(*mask).flash(*mask, fused, pass)->key_cols);
    if (flows) {
      AlgorithmCost fused_cost = priced_flash(shape, mask, line_words, pass, fused);
      if (cheaper(fused_cost, priced, objective)) {
        tiles = fused;
        priced = std::move(fused_cost);
      }
    }
  }
  priced.min_cache_words = cost.min_cache_words;
  priced.feasible = true;
  return priced;
}

// flash's prediction with these tiles.
AlgorithmCost priced_flash(const schedules::HeadShape& shape, const Mask* mask, int64_t line_words, Pass pass,
                           const schedules::FlashTiles& tiles) {
  AlgorithmCost cost;
  const auto flash_mask = mask != nullptr ? detail::cache_of(*mask).flash(*mask, tiles, pass) : nullptr;
  const auto words = pass == Pass::forward
                         ? schedules::predict_flash_forward_words(shape, tiles, flash_mask.get())
                         : schedules::predict_flash_backward_words(shape, tiles, flash_mask.get());
  cost.reads = words.total().reads;
  cost.writes = words.total().writes;
  cost.index_words = words.indices.total();
  const auto lines = pass == Pass::forward
                         ? schedules::predict_flash_forward_lines(shape, tiles, flash_mask.get(), line_words)
                         : schedules::predict_flash_backward_lines(shape, tiles, flash_mask.get(), line_words);
  cost.lines_predicted = true;
  cost.read_lines = lines.total().reads;
  cost.write_lines = lines.total().writes;
  // Partial tiles also apply their mask bits, pair by pair (plan.hpp).
  set_flops(cost, mask == nullptr ? Priced::lines : Priced::words, line_words,
            schedules::flash_flops(shape, flash_mask.get(), pass, tiles.dq_in_dkdv),
            schedules::flash_partial_pairs(flash_mask.get(), pass));
  std::ostringstream text;
  text << tiles;
  if (flash_mask) {
    text << "; " << (tiles.dq_in_dkdv ? flash_mask->key_cols : flash_mask->query_rows).num_stored() << " stored tiles";
  }
  cost.tiles = text.str();
  return cost;
}

AlgorithmCost masked_small_cache_cost(const schedules::HeadShape& shape, const Mask& mask,
                                      int64_t cache_words, int64_t line_words, Pass pass, PlanObjective objective,
                                      schedules::SparseSmallCacheTiles& tiles) {
  AlgorithmCost cost;
  cost.min_cache_words = schedules::sparse_small_cache_min_cache_words(pass);
  cost.max_entries = schedules::kSparseSmallCacheMaxEntries;
  cost.too_large = mask.nnz() > cost.max_entries;
  cost.feasible = cache_words >= cost.min_cache_words && !cost.too_large;
  if (!cost.feasible) return cost;
  // From the mask's counts alone: the schedule's structure is built only if small_cache runs.
  const auto counts = detail::cache_of(mask).small_cache_counts(mask);
  tiles = schedules::sparse_small_cache_tiles(shape, *counts, cache_words, pass, objective, line_words);
  const auto io = pass == Pass::forward
                      ? schedules::predict_sparse_small_cache_forward(shape, *counts, tiles)
                      : schedules::predict_sparse_small_cache_backward(shape, *counts, tiles);
  cost.reads = io.total().reads;
  cost.writes = io.total().writes;
  cost.index_words = io.indices.total();
  const auto lines = pass == Pass::forward
                         ? schedules::predict_sparse_small_cache_forward_lines(shape, *counts, tiles)
                         : schedules::predict_sparse_small_cache_backward_lines(shape, *counts, tiles);
  cost.lines_predicted = true;
  cost.read_lines = lines.total().reads;
  cost.write_lines = lines.total().writes;
  const auto work = schedules::estimate_sparse_small_cache_work(shape, *counts, tiles);
  cost.flops = work.flops;
  cost.entry_visits = work.entry_visits;
  cost.walk_steps = work.walk_steps;
  cost.time_price = schedules::sparse_small_cache_time_price(cost.total(), work);
  cost.tiles = tile_text(tiles);
  return cost;
}

}  // namespace

HeadCosts head_costs(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words, int64_t line_words,
                     Pass pass, PlanObjective objective) {
  check_countable(shape);
  io::check_line_words("plan", line_words);
  if (mask == nullptr || mask->is_full()) {
    // The dense costs follow from the shape, M, L, the pass and the objective (which picks
    // between the backward's two forms): kept per key, as every call over a full
    // mask plans again (the dense tile search took about 3 ms a plan, more than the attention
    // itself below n = 1024 at d = 64).
    using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int>;
    static MemoTable<Key, HeadCosts> dense_costs;
    const Key key{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v, cache_words, line_words,
                  static_cast<int>(pass), static_cast<int>(objective)};
    return dense_costs.get(key, [&] {
      HeadCosts costs;
      costs.flash = flash_cost(shape, nullptr, cache_words, line_words, pass, objective, costs.flash_tiles);
      costs.small_cache = small_cache_cost(shape, cache_words, line_words, pass, costs.small_cache_tiles);
      return costs;
    });
  }
  const detail::MaskCache::MemoNumbers numbers{shape.head_dim, shape.head_dim_v, cache_words,
                                               static_cast<int64_t>(pass), static_cast<int64_t>(objective), line_words};
  return detail::cache_of(*mask).remember<HeadCosts>(numbers, [&] {
    HeadCosts computed;
    computed.small_cache = masked_small_cache_cost(shape, *mask, cache_words, line_words, pass, objective,
                                                   computed.sparse_small_cache_tiles);
    computed.flash = flash_cost(shape, mask, cache_words, line_words, pass, objective, computed.flash_tiles);
    return computed;
  });
}

int64_t choice_margin(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                      PlanObjective objective) {
  if (masked && objective == PlanObjective::time) return flash.time_price - small_cache.time_price;
  // The I/O: in lines where both are predicted (memory moves lines), the words breaking a tie.
  if (flash.lines_predicted && small_cache.lines_predicted && flash.total_lines() != small_cache.total_lines()) {
    return flash.total_lines() - small_cache.total_lines();
  }
  return flash.total() - small_cache.total();
}

namespace {

// choice_margin at M (both must be feasible there).
int64_t cost_difference(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words,
                        int64_t line_words, Pass pass, PlanObjective objective) {
  const HeadCosts costs = head_costs(shape, mask, cache_words, line_words, pass, objective);
  return choice_margin(costs.flash, costs.small_cache, mask != nullptr, objective);
}

}  // namespace

// Every M at which auto's choice (the sign of choice_margin) changes, searching powers of two from the
// smallest M both run with up to 16 (seqlen x head_dim) for a bracket and then bisecting.
std::vector<int64_t> find_switches(const schedules::HeadShape& shape, const Mask* mask, int64_t line_words, Pass pass,
                                   PlanObjective objective) {
  const HeadCosts minimum = head_costs(shape, mask, 1, line_words, pass, objective);
  if (minimum.small_cache.too_large || minimum.flash.too_large) return {};  // one algorithm at every M
  const int64_t low = std::max(minimum.flash.min_cache_words, minimum.small_cache.min_cache_words);
  const int64_t high = 16 * std::max<int64_t>(1, std::max(shape.seqlen_q, shape.seqlen_k) *
                                                     std::max(shape.head_dim, shape.head_dim_v));
  auto sign = [&](int64_t m) {
    const int64_t diff = cost_difference(shape, mask, m, line_words, pass, objective);
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

// The dense problem's switches depend on the shape, the pass and (through the backward's form)
// the objective only, and every dense plan reports them: found once per (seqlen_q, seqlen_k, d,
// d_v, L, pass, objective) and kept (a bounded, locked table).
std::vector<int64_t> dense_switches(const schedules::HeadShape& shape, int64_t line_words, Pass pass,
                                    PlanObjective objective) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int, int>;
  static MemoTable<Key, std::vector<int64_t>> table;
  const Key key{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v, line_words, static_cast<int>(pass),
                static_cast<int>(objective)};
  return table.get(key, [&] { return find_switches(shape, nullptr, line_words, pass, objective); });
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

detail::PlannedGroup planned_group(const Mask& mask, std::vector<int64_t> heads, Algorithm algorithm,
                                   const HeadCosts& costs, Pass pass) {
  detail::PlannedGroup group{mask, std::move(heads), algorithm, {}, nullptr, {}, {}, nullptr};
  if (algorithm == Algorithm::flash) {
    group.flash_tiles = costs.flash_tiles;
    if (group.masked()) group.flash_mask = detail::cache_of(mask).flash(mask, costs.flash_tiles, pass);
  } else if (group.masked()) {
    // Built here, for the algorithm that runs only (planning read the mask's counts).
    group.sparse_small_cache_tiles = costs.sparse_small_cache_tiles;
    group.sparse_small_cache_mask = detail::cache_of(mask).small_cache(mask);
  } else {
    group.small_cache_tiles = costs.small_cache_tiles;
  }
  return group;
}

}  // namespace spattn::plan_detail
