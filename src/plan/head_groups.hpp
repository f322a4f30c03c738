// Grouping a call's query heads by mask and summing per-group predictions into the call's plan:
// shared by the dense-input planner (head_groups.cpp) and the CSR-input planner
// (csr_inputs_plan.cpp). Private to src/plan.
#pragma once

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <cstdint>
#include <vector>

namespace spattn::plan_detail {

// The query heads that use one prepared mask (copies of a Mask share it), in order of first use.
struct HeadGroup {
  Mask mask;
  std::vector<int64_t> heads;
};
// `masks`: one for all `heads`, or exactly one per query head.
std::vector<HeadGroup> group_heads(const std::vector<Mask>& masks, int64_t heads);

// The ratios plan_one_mask sets, for a plan whose totals changed after planning; `flash_total`
// is flash's words over all heads.
void update_ratios(Plan& plan, double flash_total);

// Flash's words over all of a plan's heads.
double flash_total(const Plan& plan);

}  // namespace spattn::plan_detail
