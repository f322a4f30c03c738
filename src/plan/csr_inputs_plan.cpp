// The plan with dense or CSR inputs (planner.hpp, plan_csr_inputs): the dense-input prediction
// of each head over its mask for feasibility and tiles (for words), then, once an input is CSR,
// each algorithm's exact words with these inputs (schedules/csr_inputs), the choice between them,
// and the sparse bound with Z_input from the nonzeros.
#include "mask/mask_cache.hpp"
#include "plan/cost_sum.hpp"
#include "plan/costs.hpp"
#include "plan/head_groups.hpp"
#include "plan/planner.hpp"
#include "schedules/csr_inputs/input_views.hpp"

#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

#include <algorithm>
#include <memory>
#include <vector>

namespace spattn::plan_detail {
namespace {

using schedules::HeadInputs;
using schedules::HeadShape;
using schedules::SparseIo;

// The CSR-input plans are made for words (the time objective is not applied to CSR inputs).
constexpr PlanObjective kObjective = PlanObjective::words;

// Each algorithm's exact words and lines with these inputs, with the tiles and structures it
// runs with.
schedules::InputIo flash_io(const HeadShape& head, const Mask& mask, const HeadCosts& costs, Pass pass,
                            const HeadInputs& inputs) {
  const auto flash_mask =
      mask.is_full() ? nullptr : detail::cache_of(mask).flash(mask, costs.flash_tiles, pass);
  return schedules::predict_flash_with_inputs(head, costs.flash_tiles, flash_mask.get(), pass, inputs);
}

schedules::InputIo small_cache_io(const HeadShape& head, const Mask& mask, const HeadCosts& costs,
                                  const HeadInputs& inputs) {
  if (mask.is_full()) return schedules::predict_small_cache_with_inputs(head, costs.small_cache_tiles, inputs);
  return schedules::predict_sparse_small_cache_with_inputs(head, *detail::cache_of(mask).small_cache(mask),
                                                           costs.sparse_small_cache_tiles, inputs);
}

// The CSR inputs' words and lines in place of the dense inputs' (the flops stay: the tiles are
// the same), the time price following the words (plan.hpp: time_rates().word per word).
// The plan's totals: its algorithm's prediction.
void take_chosen_totals(Plan& plan) {
  const AlgorithmCost& chosen = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  plan.reads = chosen.reads;
  plan.writes = chosen.writes;
  plan.lines_predicted = chosen.lines_predicted;
  plan.read_lines = chosen.read_lines;
  plan.write_lines = chosen.write_lines;
}

void set_io(AlgorithmCost& cost, const schedules::InputIo& io) {
  const int64_t dense_words = cost.total();
  cost.reads = io.words.total().reads;
  cost.writes = io.words.total().writes;
  cost.index_words = io.words.indices.total();
  cost.lines_predicted = true;
  cost.read_lines = io.lines.total().reads;
  cost.write_lines = io.lines.total().writes;
  cost.time_price = saturated_price(static_cast<double>(cost.time_price) +
                                               time_rates().word * static_cast<double>(cost.total() - dense_words));
}

// Every input read once (a full-width read of a CSR input: its nonzeros and index words) and every
// output written once.
double compulsory(const bounds::DenseShape& shape, Pass pass, const HeadInputs& inputs) {
  const double dense = pass == Pass::forward ? bounds::compulsory_forward(shape) : bounds::compulsory_backward(shape);
  double words = dense;
  for (const schedules::InputOperand* op : {&inputs.q, &inputs.k, &inputs.v}) {
    const auto read = op->tile(0, op->rows(), 0, op->cols());
    words += static_cast<double>(read.values + read.indices) - static_cast<double>(op->rows() * op->cols());
  }
  return words;
}


// One head's plan (its inputs already checked).
Plan plan_head(const bounds::DenseShape& shape, const AttentionInputs& inputs, const Mask& mask,
               int64_t cache_words, int64_t line_words, Pass pass, Algorithm requested) {
  // Checks M, the mask and feasibility.
  Plan plan = plan_one_mask({shape, cache_words, line_words, pass, requested, 1, SwitchSearch::skip, kObjective, {0}},
                            mask);
  if (!inputs.any_csr()) return plan;

  const HeadShape head = head_shape(shape);
  const HeadCosts costs = head_costs(head, &mask, cache_words, line_words, pass, kObjective);
  const HeadInputs in = schedules::head_inputs(inputs, line_words);
  if (plan.flash.feasible) set_io(plan.flash, flash_io(head, mask, costs, pass, in));
  if (plan.small_cache.feasible) set_io(plan.small_cache, small_cache_io(head, mask, costs, in));
  if (requested == Algorithm::automatic) {
    plan.algorithm = choose_algorithm(plan.flash, plan.small_cache, !mask.is_full(), kObjective);
  }
  take_chosen_totals(plan);

  // The sparse bound, whatever the mask: Z_input from the nonzeros, Z_QK the attended pairs.
  plan.masked = true;
  plan.z_qk = mask.nnz();
  plan.z_input = inputs.z_input();
  plan.bound = bounds::sparse(plan.z_input, static_cast<double>(plan.z_qk), static_cast<double>(cache_words));
  plan.theoretical_switch = plan.bound.crossover_m;
  plan.compulsory = compulsory(plan.shape, pass, in);
  update_ratios(plan, flash_total(plan));  // cost_heads = num_heads here
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  plan.sparse_inputs = true;
  return plan;
}

// Every head's plan summed: the words and lines (each head's nonzeros and mask give its own),
// Z_input, Z_QK, the bound and the compulsory words; one algorithm for all heads (the fewer summed
// lines, then words, when automatic, as api/head_masks.cpp chooses for dense inputs, here for
// PlanObjective::words). The
// branch, theoretical switch and tiles are the first head's (each head has its own).
Plan sum_heads(const std::vector<Plan>& heads, Algorithm requested, bool one_mask) {
  Plan plan = heads.front();
  plan.num_heads = plan.cost_heads = static_cast<int64_t>(heads.size());
  plan.head_masks = !one_mask;
  // The words restart from zero; feasible and min_cache_words start as the first head's (add_cost).
  for (AlgorithmCost* cost : {&plan.flash, &plan.small_cache}) {
    cost->reads = cost->writes = cost->index_words = cost->flops = cost->time_price = 0;
    cost->partial_pairs = cost->entry_visits = cost->walk_steps = 0;
    cost->read_lines = cost->write_lines = 0;
    if (!one_mask) cost->tiles += " (first mask; each head mask has its own tiles)";
  }
  plan.z_qk = 0;
  plan.z_input = plan.compulsory = 0.0;
  plan.bound.value = plan.bound.large_cache = plan.bound.small_cache = 0.0;
  for (const Plan& head : heads) {
    add_cost(plan.flash, head.flash);
    add_cost(plan.small_cache, head.small_cache);
    plan.z_qk += head.z_qk;
    plan.z_input += head.z_input;
    plan.compulsory += head.compulsory;
    plan.bound.value += head.bound.value;
    plan.bound.large_cache += head.bound.large_cache;
    plan.bound.small_cache += head.bound.small_cache;
    plan.masked = plan.masked || head.masked;
    plan.sparse_inputs = plan.sparse_inputs || head.sparse_inputs;
  }
  if (!plan.flash.feasible && !plan.small_cache.feasible) {
    fail("plan (sparse inputs): M = ", plan.cache_words, " words fits neither flash (needs ",
         plan.flash.min_cache_words, ") nor small_cache (needs ", plan.small_cache.min_cache_words,
         ") for every head's mask");
  }
  clear_if_infeasible(plan.flash);
  clear_if_infeasible(plan.small_cache);
  plan.algorithm = requested == Algorithm::automatic
                       ? choose_algorithm(plan.flash, plan.small_cache, plan.masked, kObjective)
                       : requested;
  take_chosen_totals(plan);
  update_ratios(plan, flash_total(plan));  // cost_heads = num_heads here
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  return plan;
}

}  // namespace

Plan plan_csr_inputs(const bounds::DenseShape& shape, const MultiHeadInputs& inputs, const std::vector<Mask>& masks,
                     int64_t cache_words, int64_t line_words, Pass pass, Algorithm requested) {
  const Algorithm planned = requested == Algorithm::reference ? Algorithm::automatic : requested;
  const auto mask_of = [&](int64_t h) -> const Mask& {
    return masks.size() == 1 ? masks.front() : masks[static_cast<size_t>(h)];
  };
  std::vector<Plan> heads;
  for (int64_t b = 0; b < inputs.batch; ++b) {
    for (int64_t h = 0; h < inputs.heads; ++h) {
      heads.push_back(plan_head(shape, inputs.head(b, h), mask_of(h), cache_words, line_words, pass, planned));
    }
  }
  const bool one_mask = std::all_of(masks.begin(), masks.end(), [&](const Mask& mask) {
    return &detail::cache_of(mask) == &detail::cache_of(masks.front());
  });
  Plan plan = heads.size() == 1 ? heads.front() : sum_heads(heads, planned, one_mask);
  plan.requested = planned;
  // What runs: each mask's heads with the plan's algorithm and the tiles the words were priced with.
  auto run = std::make_shared<detail::PlannedRun>();
  run->pass = pass;
  for (HeadGroup& group : group_heads(masks, inputs.heads)) {
    const HeadCosts costs = head_costs(head_shape(shape), &group.mask, cache_words, line_words, pass, kObjective);
    run->groups.push_back(planned_group(group.mask, std::move(group.heads), plan.algorithm, costs, pass));
  }
  plan.run = std::move(run);
  add_kv_sums(plan, shape, {inputs.batch, inputs.heads, inputs.kv_heads});
  return plan;
}

}  // namespace spattn::plan_detail
