// Summing per-head predictions (spattn::AlgorithmCost) into one call's: the heads with masks of
// their own (head_groups.cpp) and the heads with CSR inputs (csr_inputs_plan.cpp).
#pragma once

#include "plan/price.hpp"

#include <spattn/plan.hpp>

#include <algorithm>
#include <cstdint>

namespace spattn::plan_detail {

// sum += times x cost. The sum is feasible when every part is (start it feasible) and needs the
// largest part's M; its lines are predicted when every part's are (start it predicted).
inline void add_cost(AlgorithmCost& sum, const AlgorithmCost& cost, int64_t times = 1) {
  sum.feasible = sum.feasible && cost.feasible;
  sum.too_large = sum.too_large || cost.too_large;
  sum.max_entries = std::max(sum.max_entries, cost.max_entries);
  sum.min_cache_words = std::max(sum.min_cache_words, cost.min_cache_words);
  sum.reads += cost.reads * times;
  sum.writes += cost.writes * times;
  sum.index_words += cost.index_words * times;
  sum.flops += cost.flops * times;
  sum.partial_pairs += cost.partial_pairs * times;
  sum.entry_visits += cost.entry_visits * times;
  sum.walk_steps += cost.walk_steps * times;
  sum.lines_predicted = sum.lines_predicted && cost.lines_predicted;
  sum.read_lines += cost.read_lines * times;
  sum.write_lines += cost.write_lines * times;
  sum.time_price = saturated_price(static_cast<double>(sum.time_price) +
                                             static_cast<double>(cost.time_price) * static_cast<double>(times));
}

// An infeasible sum reads zero words, flops and price, as one infeasible prediction does.
inline void clear_if_infeasible(AlgorithmCost& sum) {
  if (!sum.feasible) {
    sum.reads = sum.writes = sum.index_words = sum.flops = sum.time_price = 0;
    sum.partial_pairs = sum.entry_visits = sum.walk_steps = 0;
    sum.read_lines = sum.write_lines = 0;
    sum.lines_predicted = false;
  }
}

}  // namespace spattn::plan_detail
