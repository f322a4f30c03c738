// The plan with dense or CSR inputs (sparse_inputs.hpp): the dense-input plan of plan.hpp for
// feasibility and tiles, then, once an input is CSR, each algorithm's exact words with these
// inputs (schedules/csr_inputs/input_traffic.hpp), the choice between them, and the sparse bound with
// Z_input from the nonzeros.
#include <spattn/sparse_inputs.hpp>

#include "api/cost_sum.hpp"
#include "mask/mask_cache.hpp"
#include "api/sparse_inputs_detail.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/flash/flash_mask.hpp"
#include "plan/flash_tile_choice.hpp"
#include "schedules/csr_inputs/input_traffic.hpp"
#include "schedules/small_cache/small_cache.hpp"
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

#include <algorithm>
#include <vector>

namespace spattn {
namespace {

using schedules::HeadInputs;
using schedules::HeadShape;
using schedules::SparseIo;
using api_detail::add_cost;
using api_detail::clear_if_infeasible;

// The tiles and structures each algorithm runs with (as api/head_runner.cpp chooses them), and
// its exact words with these inputs. Sparse inputs plan both algorithms' tiles for words (spattn/plan.hpp:
// the time objective is not applied to CSR inputs yet).
SparseIo flash_words(const HeadShape& head, const Mask& mask, int64_t cache_words, Pass pass,
                     const HeadInputs& inputs) {
  const bool sparse = !mask.is_full();
  const auto tiles = sparse ? schedules::masked_flash_tiles(head, cache_words, pass, mask.csr(), PlanObjective::words)
                            : schedules::flash_tiles(head, cache_words, pass);
  const auto flash_mask = sparse ? mask.cache().flash(mask, tiles, pass) : nullptr;
  return schedules::predict_flash_words(head, tiles, flash_mask.get(), pass, inputs);
}

SparseIo small_cache_words(const HeadShape& head, const Mask& mask, int64_t cache_words, Pass pass,
                           const HeadInputs& inputs) {
  if (mask.is_full()) {
    return schedules::predict_small_cache_words(head, schedules::small_cache_tiles(head, cache_words, pass),
                                                inputs);
  }
  const auto tiles = mask.cache().small_cache_tiles(mask, head, cache_words, pass, PlanObjective::words);
  return schedules::predict_sparse_small_cache_words(head, *mask.cache().small_cache(mask), tiles, inputs);
}

// The CSR inputs' words in place of the dense inputs' (the flops stay: the tiles are the same),
// the time price following the words (plan.hpp: time_rates().word per word).
void set_words(AlgorithmCost& cost, const SparseIo& words) {
  const int64_t dense_words = cost.total();
  cost.reads = words.total().reads;
  cost.writes = words.total().writes;
  cost.index_words = words.indices.total();
  cost.time_price = schedules::saturated_price(static_cast<double>(cost.time_price) +
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

// The ratios of the plan's words to the bound and to flash's (cost_heads = num_heads here).
void set_ratios(Plan& plan) {
  const double total = static_cast<double>(plan.total());
  plan.ratio_to_bound = plan.bound.value > 0.0 ? total / plan.bound.value : 0.0;
  plan.ratio_to_flash =
      plan.flash.feasible && plan.flash.total() > 0 ? total / static_cast<double>(plan.flash.total()) : 0.0;
  plan.beats_worst_case = plan.masked && plan.ratio_to_bound < 1.0;
}

// One head's plan (its inputs already checked).
Plan plan_head(const bounds::DenseShape& shape, const AttentionInputs& inputs, const Mask& mask,
               int64_t cache_words, Pass pass, Algorithm requested) {
  Plan plan = plan_attention(shape, mask, cache_words, pass, requested);  // checks M, mask, feasibility
  if (!inputs.any_csr()) return plan;

  const HeadShape head{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v};
  const HeadInputs in = sparse_inputs_detail::head_inputs(inputs);
  if (plan.flash.feasible) {
    set_words(plan.flash, flash_words(head, mask, cache_words, pass, in));
  }
  if (plan.small_cache.feasible) set_words(plan.small_cache, small_cache_words(head, mask, cache_words, pass, in));
  if (requested == Algorithm::automatic) {
    plan.algorithm = choose_algorithm(plan.flash, plan.small_cache, !mask.is_full(), PlanObjective::words);
  }
  const AlgorithmCost& chosen = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  plan.reads = chosen.reads;
  plan.writes = chosen.writes;

  // The sparse bound, whatever the mask: Z_input from the nonzeros, Z_QK the attended pairs.
  plan.masked = true;
  plan.z_qk = mask.nnz();
  plan.z_input = inputs.z_input();
  plan.bound = bounds::sparse(plan.z_input, static_cast<double>(plan.z_qk), static_cast<double>(cache_words));
  plan.theoretical_switch = plan.bound.crossover_m;
  plan.compulsory = compulsory(plan.shape, pass, in);
  set_ratios(plan);
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  plan.sparse_inputs = true;
  return plan;
}

// Every head's plan summed: the words (each head's nonzeros and mask give its own), Z_input, Z_QK,
// the bound and the compulsory words; one algorithm for all heads (the fewer summed words when
// automatic, as api/head_masks.cpp chooses for dense inputs, here for PlanObjective::words). The
// branch, theoretical switch and tiles are the first head's (each head has its own).
Plan sum_heads(const std::vector<Plan>& heads, Algorithm requested, bool one_mask) {
  Plan plan = heads.front();
  plan.num_heads = plan.cost_heads = static_cast<int64_t>(heads.size());
  plan.head_masks = !one_mask;
  // The words restart from zero; feasible and min_cache_words start as the first head's (add_cost).
  for (AlgorithmCost* cost : {&plan.flash, &plan.small_cache}) {
    cost->reads = cost->writes = cost->index_words = cost->flops = cost->time_price = 0;
    cost->partial_pairs = cost->entry_visits = cost->walk_steps = 0;
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
                       ? choose_algorithm(plan.flash, plan.small_cache, plan.masked, PlanObjective::words)
                       : requested;
  const AlgorithmCost& chosen = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  plan.reads = chosen.reads;
  plan.writes = chosen.writes;
  set_ratios(plan);
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  return plan;
}

}  // namespace

MultiHeadInputs MultiHeadInputs::one(const AttentionInputs& inputs) { return {1, 1, 1, {inputs.q}, {inputs.k}, {inputs.v}}; }

AttentionInputs MultiHeadInputs::head(int64_t b, int64_t h) const {
  const int64_t g = h / std::max<int64_t>(heads / std::max<int64_t>(kv_heads, 1), 1);
  return {q[static_cast<size_t>(b * heads + h)], k[static_cast<size_t>(b * kv_heads + g)],
          v[static_cast<size_t>(b * kv_heads + g)]};
}

Plan sparse_inputs_detail::plan_heads(const bounds::DenseShape& shape, const MultiHeadInputs& inputs,
                                      const std::vector<Mask>& masks, int64_t cache_words, Pass pass,
                                      Algorithm requested) {
  std::vector<Plan> heads;
  for (int64_t b = 0; b < inputs.batch; ++b) {
    for (int64_t h = 0; h < inputs.heads; ++h) {
      heads.push_back(plan_head(shape, inputs.head(b, h), head_mask(masks, h), cache_words, pass, requested));
    }
  }
  const bool one_mask = std::all_of(masks.begin(), masks.end(),
                                    [&](const Mask& mask) { return &mask.cache() == &masks.front().cache(); });
  return heads.size() == 1 ? heads.front() : sum_heads(heads, requested, one_mask);
}

namespace {

Plan checked_plan(const MultiHeadInputs& inputs, const std::vector<Mask>& masks, bool per_head, int64_t cache_words,
                  Pass pass, Algorithm requested) {
  const char* where = "plan (sparse inputs)";
  const bounds::DenseShape shape = sparse_inputs_detail::check_inputs(where, inputs);
  sparse_inputs_detail::check_masks(where, masks, per_head, inputs, shape);
  return sparse_inputs_detail::plan_heads(shape, inputs, masks, cache_words, pass, requested);
}

}  // namespace

Plan plan_attention(const MultiHeadInputs& inputs, const Mask& mask, int64_t cache_words, Pass pass,
                    Algorithm requested) {
  return checked_plan(inputs, {mask}, false, cache_words, pass, requested);
}

Plan plan_attention(const MultiHeadInputs& inputs, const std::vector<Mask>& masks, int64_t cache_words, Pass pass,
                    Algorithm requested) {
  return checked_plan(inputs, masks, true, cache_words, pass, requested);
}

Plan plan_attention(const AttentionInputs& inputs, const Mask& mask, int64_t cache_words, Pass pass,
                    Algorithm requested) {
  return plan_attention(MultiHeadInputs::one(inputs), mask, cache_words, pass, requested);
}

}  // namespace spattn
