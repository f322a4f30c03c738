// The planner's entry points for whole calls: the API plans every call here, and the previews
// (plan_attention) call the same functions with the same defaults, so the plan a user previews is
// the plan that runs. Private to src (the public declarations are in spattn/plan.hpp,
// spattn/attention.hpp and spattn/sparse_inputs.hpp).
#pragma once

#include <spattn/bounds.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>
#include <spattn/inputs.hpp>
#include <spattn/io.hpp>

#include <cstdint>
#include <vector>

namespace spattn::plan_detail {

// The heads of one call: batch entries, query heads, and kv heads (heads is a multiple of kv_heads:
// grouped-query attention when larger).
struct CallHeads {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;
};

// What plan_one_mask plans: one mask's `num_heads` head problems, which run as one group of the
// query heads `run_heads` (empty: a plan for reporting, with no group to run).
struct OneMaskRequest {
  bounds::DenseShape shape;
  int64_t cache_words = 0;
  int64_t line_words = io::kDefaultLineWords;  // checked by the caller (io::plan_line_words)
  Pass pass = Pass::forward;
  Algorithm requested = Algorithm::automatic;
  int64_t num_heads = 1;
  SwitchSearch switch_search = SwitchSearch::skip;
  PlanObjective objective = PlanObjective::time;
  std::vector<int64_t> run_heads;
};

// One mask's plan (plan_attention's checks and messages; a requested algorithm that does not fit
// M throws).
Plan plan_one_mask(const OneMaskRequest& request, const Mask& mask);

// A call with dense inputs: the query heads grouped by mask (`masks`: one for all heads, or one per
// query head; checked by the caller), every group planned over its mask, one algorithm for all of
// them (auto: the smaller sum over all heads), and in the backward the grouped-query dK/dV sums
// (head_groups.cpp). Algorithm::reference plans the automatic choice, for reporting.
Plan plan_dense_inputs(const bounds::DenseShape& shape, const std::vector<Mask>& masks, const CallHeads& heads,
                       int64_t cache_words, int64_t line_words, Pass pass, Algorithm requested,
                       PlanObjective objective);

// A call with CSR (or dense) inputs, checked by the caller: every (batch, query head) priced with
// its own nonzeros and mask, for words; one algorithm for all heads; the grouped-query sums in the
// backward (csr_inputs_plan.cpp).
Plan plan_csr_inputs(const bounds::DenseShape& shape, const MultiHeadInputs& inputs, const std::vector<Mask>& masks,
                     int64_t cache_words, int64_t line_words, Pass pass, Algorithm requested);

// A grouped-query sum's tile for a rows x cols gradient: as wide as fits (a whole row when
// 2 cols <= M), then as many rows (InvalidArgument when M < 2).
detail::KvSumTile kv_sum_tile(int64_t rows, int64_t cols, int64_t cache_words);

// Adds the backward's grouped-query dK, dV sums to `plan` (none when heads == kv_heads): per batch
// entry and kv head, the group's partials read once each and the sum written once (exact; the
// words kv_reduction.hpp moves):
//   reads  group * seqlen_k * (d + d_v),  writes seqlen_k * (d + d_v).
// The plan's run gets the sums' tiles (kv_sum_tile).
void add_kv_sums(Plan& plan, const bounds::DenseShape& shape, const CallHeads& heads);

}  // namespace spattn::plan_detail
