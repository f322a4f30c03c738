// Planning a call with dense inputs (planner.hpp): one mask for all heads, or one per query head.
// Heads whose masks are the same prepared Mask form a group that runs together (its own tiles and
// re-blocked mask); every group runs the same algorithm, the one with the smaller total over all
// heads when automatic. The returned Plan speaks for all heads: with one group it is that group's
// plan; with several its per-head costs are summed over the heads of one batch entry
// (Plan::cost_heads) and its bound, compulsory words and reads / writes over all.
#include "plan/head_groups.hpp"

#include "plan/cost_sum.hpp"
#include "plan/planned_run.hpp"
#include "plan/planner.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

namespace spattn::plan_detail {

namespace {

struct GroupPlan {
  HeadGroup group;
  Plan plan;  // batch * heads.size() problems
};

// The per-head costs of every group (flash's or small_cache's) added up over the heads of one
// batch entry.
AlgorithmCost sum_costs(const std::vector<GroupPlan>& groups, bool flash) {
  AlgorithmCost sum;
  sum.feasible = true;
  sum.lines_predicted = true;
  for (const GroupPlan& group : groups) {
    const AlgorithmCost& cost = flash ? group.plan.flash : group.plan.small_cache;
    add_cost(sum, cost, static_cast<int64_t>(group.group.heads.size()));
    if (sum.tiles.empty()) sum.tiles = cost.tiles;
  }
  if (groups.size() > 1) sum.tiles += " (first mask; each head mask has its own tiles)";
  clear_if_infeasible(sum);
  return sum;
}

Plan combine(const std::vector<GroupPlan>& groups, int64_t batch, int64_t heads) {
  Plan plan = groups.front().plan;
  plan.num_heads = batch * heads;
  plan.cost_heads = heads;
  plan.head_masks = true;
  plan.flash = sum_costs(groups, true);
  plan.small_cache = sum_costs(groups, false);
  plan.reads = plan.writes = 0;
  plan.read_lines = plan.write_lines = 0;
  plan.lines_predicted = true;
  plan.compulsory = 0.0;
  plan.bound.value = plan.bound.large_cache = plan.bound.small_cache = 0.0;
  plan.masked = false;
  plan.z_qk = 0;
  auto run = std::make_shared<detail::PlannedRun>(*groups.front().plan.run);
  run->groups.clear();
  for (const GroupPlan& group : groups) {
    plan.reads += group.plan.reads;
    plan.writes += group.plan.writes;
    plan.lines_predicted = plan.lines_predicted && group.plan.lines_predicted;
    plan.read_lines += group.plan.read_lines;
    plan.write_lines += group.plan.write_lines;
    plan.compulsory += group.plan.compulsory;
    plan.bound.value += group.plan.bound.value;
    plan.bound.large_cache += group.plan.bound.large_cache;
    plan.bound.small_cache += group.plan.bound.small_cache;
    plan.masked = plan.masked || group.plan.masked;
    plan.z_qk += group.plan.z_qk * static_cast<int64_t>(group.group.heads.size());
    run->groups.insert(run->groups.end(), group.plan.run->groups.begin(), group.plan.run->groups.end());
  }
  plan.run = std::move(run);
  // Each head mask has its own switch; none is searched for the mixture.
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  update_ratios(plan, flash_total(plan));
  return plan;
}

// Auto's one algorithm for every head: choose_algorithm over the heads' summed predictions (masked
// when any head's mask is not full).
Algorithm cheaper_overall(const std::vector<GroupPlan>& groups, PlanObjective objective) {
  const AlgorithmCost flash = sum_costs(groups, true);
  const AlgorithmCost small_cache = sum_costs(groups, false);
  if (!flash.feasible && !small_cache.feasible) {
    fail("plan: M = ", groups.front().plan.cache_words, " words fits neither flash (needs ",
         flash.min_cache_words, ") nor small_cache (needs ", small_cache.min_cache_words,
         ") for every head's mask");
  }
  const bool masked = std::any_of(groups.begin(), groups.end(), [](const GroupPlan& g) { return g.plan.masked; });
  return choose_algorithm(flash, small_cache, masked, objective);
}

}  // namespace

std::vector<HeadGroup> group_heads(const std::vector<Mask>& masks, int64_t heads) {
  std::vector<HeadGroup> groups;
  if (masks.size() == 1) {
    HeadGroup all{masks.front(), {}};
    for (int64_t h = 0; h < heads; ++h) all.heads.push_back(h);
    groups.push_back(std::move(all));
    return groups;
  }
  std::map<const void*, size_t> group_of;
  for (int64_t h = 0; h < heads; ++h) {
    const Mask& mask = masks[static_cast<size_t>(h)];
    const auto [found, inserted] = group_of.emplace(&detail::cache_of(mask), groups.size());
    if (inserted) groups.push_back({mask, {}});
    groups[found->second].heads.push_back(h);
  }
  return groups;
}

void update_ratios(Plan& plan, double flash_total) {
  const double total = static_cast<double>(plan.total());
  plan.ratio_to_bound = plan.bound.value > 0.0 ? total / plan.bound.value : 0.0;
  plan.ratio_to_flash = plan.flash.feasible && flash_total > 0.0 ? total / flash_total : 0.0;
  plan.beats_worst_case = plan.masked && plan.ratio_to_bound < 1.0;
}

double flash_total(const Plan& plan) {
  return static_cast<double>(plan.flash.total()) * static_cast<double>(plan.num_heads) /
         static_cast<double>(std::max<int64_t>(plan.cost_heads, 1));
}

detail::KvSumTile kv_sum_tile(int64_t rows, int64_t cols, int64_t cache_words) {
  if (cache_words < 2) fail("grouped-query dK/dV sum: M = ", cache_words, " words, needs at least 2");
  detail::KvSumTile tile;
  tile.cols = std::clamp<int64_t>(cache_words / 2, 1, std::max<int64_t>(cols, 1));
  tile.rows = std::clamp<int64_t>(cache_words / (2 * tile.cols), 1, std::max<int64_t>(rows, 1));
  return tile;
}

void add_kv_sums(Plan& plan, const bounds::DenseShape& shape, const CallHeads& heads) {
  if (plan.pass != Pass::backward || heads.kv_heads <= 0 || heads.heads <= heads.kv_heads) return;
  const int64_t group = heads.heads / heads.kv_heads;
  const int64_t head_dim_v = shape.head_dim_v > 0 ? shape.head_dim_v : shape.head_dim;
  if (plan.run != nullptr) {
    auto run = std::make_shared<detail::PlannedRun>(*plan.run);
    run->dk_sum = kv_sum_tile(shape.seqlen_k, shape.head_dim, plan.cache_words);
    run->dv_sum = kv_sum_tile(shape.seqlen_k, head_dim_v, plan.cache_words);
    plan.run = std::move(run);
  }
  const int64_t width = shape.seqlen_k * (shape.head_dim + head_dim_v);
  const int64_t sums = heads.batch * heads.kv_heads;
  plan.kv_sum_reads = sums * group * width;
  plan.kv_sum_writes = sums * width;
  plan.reads += plan.kv_sum_reads;
  plan.writes += plan.kv_sum_writes;
  // The sums' lines are not modelled (plan.hpp): the call's lines are then not predicted.
  plan.lines_predicted = false;
  plan.read_lines = plan.write_lines = 0;
  // Flash would move the same sums: compare like with like.
  update_ratios(plan, flash_total(plan) + static_cast<double>(plan.kv_sum_reads + plan.kv_sum_writes));
}

Plan plan_dense_inputs(const bounds::DenseShape& shape, const std::vector<Mask>& masks, const CallHeads& heads,
                       int64_t cache_words, int64_t line_words, Pass pass, Algorithm requested,
                       PlanObjective objective) {
  const Algorithm planned = requested == Algorithm::reference ? Algorithm::automatic : requested;
  std::vector<GroupPlan> groups;
  for (HeadGroup& group : group_heads(masks, heads.heads)) groups.push_back({std::move(group), Plan{}});
  Plan plan;
  if (groups.empty()) {  // no heads: a plan of the shape, for reporting
    const Mask mask = masks.empty() ? Mask::full(shape.seqlen_q, shape.seqlen_k) : masks.front();
    plan = plan_one_mask({shape, cache_words, line_words, pass, planned, 0, SwitchSearch::skip, objective, {}},
                         mask);
  } else {
    const auto plan_groups = [&](Algorithm algorithm) {
      for (GroupPlan& group : groups) {
        const int64_t num_heads = heads.batch * static_cast<int64_t>(group.group.heads.size());
        group.plan = plan_one_mask({shape, cache_words, line_words, pass, algorithm, num_heads, SwitchSearch::skip,
                                    objective, group.group.heads},
                                   group.group.mask);
      }
    };
    plan_groups(planned);
    if (groups.size() > 1 && planned == Algorithm::automatic) {
      // One algorithm for every head: re-plan each group with it (the predictions are kept in the
      // masks, so this only re-reads them).
      plan_groups(cheaper_overall(groups, objective));
      for (GroupPlan& group : groups) group.plan.requested = Algorithm::automatic;
    }
    plan = groups.size() == 1 ? groups.front().plan : combine(groups, heads.batch, heads.heads);
  }
  plan.requested = requested == Algorithm::reference ? Algorithm::automatic : requested;
  add_kv_sums(plan, shape, heads);
  return plan;
}

}  // namespace spattn::plan_detail
