// The planner's inner steps: both algorithms' exact predictions for one head over one mask, with
// the tiles they were made for (the tiles that will run); the switch M; the typed group a chosen
// algorithm runs. Private to src/plan.
#pragma once

#include "plan/planned_run.hpp"
#include "schedules/common/head_problem.hpp"

#include <spattn/bounds.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>

#include <cstdint>
#include <vector>

namespace spattn::plan_detail {

schedules::HeadShape head_shape(const bounds::DenseShape& shape);

// Both algorithms' per-head predictions at M and the tiles each was predicted with (default tiles
// where infeasible). Over a mask other than full: block-sparse flash and the density-adaptive
// small_cache, their tiles chosen for `objective`; over a full mask the dense schedules, whose
// tiles do not depend on it.
struct HeadCosts {
  AlgorithmCost flash;
  AlgorithmCost small_cache;
  schedules::FlashTiles flash_tiles;
  schedules::SmallCacheTiles small_cache_tiles;                // full mask
  schedules::SparseSmallCacheTiles sparse_small_cache_tiles;   // any other mask
};

// mask == nullptr (or a full mask) is the dense problem. A mask's predictions walk its structure:
// kept in the mask's memo per (head_dim, head_dim_v, M, L, pass, objective). Every tile is
// chosen and every line predicted for lines of `line_words` words (1: the paper's word model).
// Flash's backward accumulates dQ in its dK/dV pass (FlashTiles::dq_in_dkdv) where that is cheaper
// for the objective.
HeadCosts head_costs(const schedules::HeadShape& shape, const Mask* mask, int64_t cache_words, int64_t line_words,
                     Pass pass, PlanObjective objective);

// Positive when auto prefers small_cache over flash (both feasible), negative for flash, 0 on a
// tie: the predicted words, or under the time objective over a mask the time prices.
int64_t choice_margin(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                      PlanObjective objective);

// Every M at which auto's choice changes, and the one nearest to cache_words (0 when none).
// The dense problem's are searched once per (seqlen_q, seqlen_k, d, d_v, L, pass, objective) and
// kept.
std::vector<int64_t> find_switches(const schedules::HeadShape& shape, const Mask* mask, int64_t line_words, Pass pass,
                                   PlanObjective objective);
std::vector<int64_t> dense_switches(const schedules::HeadShape& shape, int64_t line_words, Pass pass,
                                    PlanObjective objective);
int64_t nearest_switch(const std::vector<int64_t>& switches, int64_t cache_words);

// The group `heads` of `mask` runs: `algorithm` (flash or small_cache) with the tiles of `costs`
// and the prepared structures they walk, from the mask's cache.
detail::PlannedGroup planned_group(const Mask& mask, std::vector<int64_t> heads, Algorithm algorithm,
                                   const HeadCosts& costs, Pass pass);

}  // namespace spattn::plan_detail
