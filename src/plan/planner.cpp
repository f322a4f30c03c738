// The planner's public entry points (spattn/plan.hpp) and its plan of one mask's heads: both
// algorithms predicted exactly, the choice, the bound, the switch M, and the typed run.
#include <spattn/plan.hpp>

#include "plan/costs.hpp"
#include "plan/planner.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

namespace spattn {

using plan_detail::HeadCosts;

Algorithm choose_algorithm(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                           PlanObjective objective) {
  if (!flash.feasible || !small_cache.feasible) return flash.feasible ? Algorithm::flash : Algorithm::small_cache;
  return plan_detail::choice_margin(flash, small_cache, masked, objective) > 0 ? Algorithm::small_cache : Algorithm::flash;
}

Plan plan_heads(const bounds::DenseShape& shape, const Mask& mask, Pass pass, const HeadPlanOptions& options) {
  plan_detail::OneMaskRequest request{shape,
                                      options.cache_words,
                                      io::plan_line_words("plan", options.line_words, nullptr),
                                      pass,
                                      options.algorithm,
                                      options.num_heads,
                                      options.switch_search,
                                      options.objective,
                                      {}};
  request.run_heads.resize(static_cast<size_t>(std::max<int64_t>(options.num_heads, 0)));
  for (size_t h = 0; h < request.run_heads.size(); ++h) request.run_heads[h] = static_cast<int64_t>(h);
  return plan_detail::plan_one_mask(request, mask);
}

namespace plan_detail {

Plan plan_one_mask(const OneMaskRequest& request, const Mask& mask) {
  const bounds::DenseShape& shape = request.shape;
  const int64_t cache_words = request.cache_words, line_words = request.line_words, num_heads = request.num_heads;
  const Pass pass = request.pass;
  const Algorithm requested = request.requested;
  const PlanObjective objective = request.objective;
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
  plan.line_words = line_words;
  plan.requested = requested;
  plan.objective = objective;
  const HeadCosts costs = head_costs(head, sparse_mask, cache_words, line_words, pass, objective);
  plan.flash = costs.flash;
  plan.small_cache = costs.small_cache;

  if (requested == Algorithm::flash && !plan.flash.feasible) {
    fail("plan: flash ", pass_name(pass), " needs M >= ", plan.flash.min_cache_words,
         " words for head_dim ", head.head_dim, ", head_dim_v ", head.head_dim_v, "; got M = ",
         cache_words);
  }
  if (requested == Algorithm::small_cache && plan.small_cache.too_large) {
    fail("plan: small_cache ", pass_name(pass), " materializes a value per attended pair: the mask has ",
         sparse_mask->nnz(), ", at most ", plan.small_cache.max_entries, " run (use flash)");
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
  plan.lines_predicted = chosen.lines_predicted;
  plan.read_lines = chosen.read_lines * num_heads;
  plan.write_lines = chosen.write_lines * num_heads;

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
  auto run = std::make_shared<detail::PlannedRun>();
  run->pass = pass;
  if (!request.run_heads.empty()) {
    run->groups.push_back(plan_detail::planned_group(mask, request.run_heads, plan.algorithm, costs, pass));
  }
  plan.run = std::move(run);
  if (request.switch_search == SwitchSearch::search || !plan.masked) {
    const auto switches =
        sparse_mask != nullptr ? find_switches(head, sparse_mask, line_words, pass, objective)
                               : dense_switches(head, line_words, pass, objective);
    plan.switch_cache_words = nearest_switch(switches, cache_words);
    plan.switches = switches;
    plan.switch_searched = true;
  }
  return plan;
}

}  // namespace plan_detail

}  // namespace spattn
