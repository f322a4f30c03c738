// Planning one call's heads over their masks (head_masks.hpp).
#include "api/head_masks.hpp"

#include "api/cost_sum.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <map>

namespace spattn::api_detail {

namespace {

// The per-head costs of every group (flash's or small_cache's) added up over the heads of one
// batch entry.
AlgorithmCost sum_costs(const std::vector<MaskGroup>& groups, bool flash) {
  AlgorithmCost sum;
  sum.feasible = true;
  for (const MaskGroup& group : groups) {
    const AlgorithmCost& cost = flash ? group.plan.flash : group.plan.small_cache;
    add_cost(sum, cost, static_cast<int64_t>(group.heads.size()));
    if (sum.tiles.empty()) sum.tiles = cost.tiles;
  }
  if (groups.size() > 1) sum.tiles += " (first mask; each head mask has its own tiles)";
  clear_if_infeasible(sum);
  return sum;
}

// The ratios plan_attention (planner.cpp) sets, for totals changed after planning.
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

Plan combine(const std::vector<MaskGroup>& groups, int64_t batch, int64_t heads) {
  Plan plan = groups.front().plan;
  plan.num_heads = batch * heads;
  plan.cost_heads = heads;
  plan.head_masks = true;
  plan.flash = sum_costs(groups, true);
  plan.small_cache = sum_costs(groups, false);
  plan.reads = plan.writes = 0;
  plan.compulsory = 0.0;
  plan.bound.value = plan.bound.large_cache = plan.bound.small_cache = 0.0;
  plan.masked = false;
  plan.z_qk = 0;
  for (const MaskGroup& group : groups) {
    plan.reads += group.plan.reads;
    plan.writes += group.plan.writes;
    plan.compulsory += group.plan.compulsory;
    plan.bound.value += group.plan.bound.value;
    plan.bound.large_cache += group.plan.bound.large_cache;
    plan.bound.small_cache += group.plan.bound.small_cache;
    plan.masked = plan.masked || group.plan.masked;
    plan.z_qk += group.plan.z_qk * static_cast<int64_t>(group.heads.size());
  }
  // Each head mask has its own switch; none is searched for the mixture.
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  update_ratios(plan, flash_total(plan));
  return plan;
}

// Auto's one algorithm for every head: choose_algorithm over the heads' summed predictions (masked
// when any head's mask is not full).
Algorithm cheaper_overall(const std::vector<MaskGroup>& groups, PlanObjective objective) {
  const AlgorithmCost flash = sum_costs(groups, true);
  const AlgorithmCost small_cache = sum_costs(groups, false);
  if (!flash.feasible && !small_cache.feasible) {
    fail("plan: M = ", groups.front().plan.cache_words, " words fits neither flash (needs ",
         flash.min_cache_words, ") nor small_cache (needs ", small_cache.min_cache_words,
         ") for every head's mask");
  }
  const bool masked = std::any_of(groups.begin(), groups.end(), [](const MaskGroup& g) { return g.plan.masked; });
  return choose_algorithm(flash, small_cache, masked, objective);
}

}  // namespace

std::vector<MaskGroup> group_heads(const std::vector<Mask>& masks, int64_t heads) {
  std::vector<MaskGroup> groups;
  if (masks.size() == 1) {
    MaskGroup all{masks.front(), {}, Plan{}};
    for (int64_t h = 0; h < heads; ++h) all.heads.push_back(h);
    groups.push_back(std::move(all));
    return groups;
  }
  std::map<const void*, size_t> group_of;
  for (int64_t h = 0; h < heads; ++h) {
    const Mask& mask = masks[static_cast<size_t>(h)];
    const auto [found, inserted] = group_of.emplace(&mask.cache(), groups.size());
    if (inserted) groups.push_back({mask, {}, Plan{}});
    groups[found->second].heads.push_back(h);
  }
  return groups;
}

HeadsPlan plan_heads(const bounds::DenseShape& shape, const std::vector<Mask>& masks, int64_t batch,
                     int64_t heads, int64_t cache_words, Pass pass, Algorithm requested,
                     PlanObjective objective) {
  const Algorithm planned = requested == Algorithm::reference ? Algorithm::automatic : requested;
  HeadsPlan result;
  result.groups = group_heads(masks, heads);
  if (result.groups.empty()) {  // no heads: a plan of the shape, for reporting
    const Mask& mask = masks.empty() ? Mask::full(shape.seqlen_q, shape.seqlen_k) : masks.front();
    result.plan = plan_attention(shape, mask, cache_words, pass, planned, 0, false, objective);
    return result;
  }
  for (MaskGroup& group : result.groups) {
    group.plan = plan_attention(shape, group.mask, cache_words, pass, planned,
                                batch * static_cast<int64_t>(group.heads.size()), false, objective);
  }
  if (result.groups.size() == 1) {
    result.plan = result.groups.front().plan;
    return result;
  }
  if (planned == Algorithm::automatic) {
    // One algorithm for every head: re-plan each group with it (the predictions are cached in the
    // masks, so this only re-reads them).
    const Algorithm chosen = cheaper_overall(result.groups, objective);
    for (MaskGroup& group : result.groups) {
      group.plan = plan_attention(shape, group.mask, cache_words, pass, chosen,
                                  batch * static_cast<int64_t>(group.heads.size()), false, objective);
      group.plan.requested = Algorithm::automatic;
    }
  }
  result.plan = combine(result.groups, batch, heads);
  return result;
}

void add_kv_sum_words(Plan& plan, int64_t reads, int64_t writes) {
  plan.kv_sum_reads += reads;
  plan.kv_sum_writes += writes;
  plan.reads += reads;
  plan.writes += writes;
  // Flash would move the same sums: compare like with like.
  update_ratios(plan, flash_total(plan) + static_cast<double>(reads + writes));
}

}  // namespace spattn::api_detail
