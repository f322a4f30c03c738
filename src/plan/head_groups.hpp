// Planning the heads of one call: one mask for all heads, or one per query head. Heads whose
// masks are the same prepared Mask (copies share it) form a group that runs together (its own
// tiles and re-blocked mask); every group runs the same algorithm, the one with the smaller total
// predicted I/O over all heads when automatic. The returned Plan speaks for all heads: with one
// group it is that group's plan; with several its per-head costs are summed over the heads of one
// batch entry (Plan::cost_heads) and its bound, compulsory words and reads / writes over all.
#pragma once

#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <cstdint>
#include <vector>

namespace spattn::api_detail {

struct MaskGroup {
  Mask mask;
  std::vector<int64_t> heads;  // the query heads h (of every batch entry) that use it
  Plan plan;                   // batch * heads.size() problems, with the common algorithm
};

struct HeadsPlan {
  std::vector<MaskGroup> groups;
  Plan plan;  // all heads
};

// The heads grouped by prepared mask (the identity of its shared cache), in order of first use;
// the groups' plans left empty. `masks`: one for all heads, or exactly `heads`.
std::vector<MaskGroup> group_heads(const std::vector<Mask>& masks, int64_t heads);

// `masks`: one for all heads, or exactly `heads` (checked by the caller). Algorithm::reference
// plans the automatic choice (for reporting). `objective`: how flash's tiles are chosen for masks.
HeadsPlan plan_heads(const bounds::DenseShape& shape, const std::vector<Mask>& masks, int64_t batch,
                     int64_t heads, int64_t cache_words, Pass pass, Algorithm requested,
                     PlanObjective objective);

// Adds `reads` and `writes` words moved outside the schedules (the grouped-query dK/dV sums) to
// the plan's totals and ratios.
void add_kv_sum_words(Plan& plan, int64_t reads, int64_t writes);

}  // namespace spattn::api_detail
