// The vocabulary every layer shares: which pass runs, which algorithm, and what a plan minimizes.
// Declared at the bottom of the library (docs/architecture.md, "Layers") so that a schedule or the
// device planning can name a pass without including the planner.
#pragma once

#include <string>

namespace spattn {

enum class Algorithm {
  automatic,    // the smaller predicted I/O of flash and small_cache
  reference,    // the fp64 oracle (not counted)
  flash,        // FlashAttention tiling, the large-cache regime (M >= about d^2)
  small_cache,  // the paper's materialize-and-tile algorithm, the small-cache regime
};
const char* algorithm_name(Algorithm algorithm);  // "auto", "reference", "flash", "small_cache"
// Parses a name as printed by algorithm_name; throws InvalidArgument listing the valid names.
Algorithm parse_algorithm(const std::string& name);

enum class Pass { forward, backward };
const char* pass_name(Pass pass);  // "forward" / "backward"

// What a plan minimizes for a mask (a full mask is planned the same under both):
//   time:  native speed, the default everywhere (the API and plan_attention). Flash's tiles over
//          a mask minimize words + flops / 16 over the pairs its visited tiles compute;
//          small_cache's tiles minimize its time price (wide column windows, few chunks); auto
//          runs the algorithm with the smaller AlgorithmCost::time_price: words and work in one
//          currency (docs/api.md, "Words or time").
//   words: the fewest words moved. Flash's tiles are flash_tiles()' (the outer tile as large as M
//          allows) and auto runs the algorithm predicted to move fewer words: the I/O study's
//          choice (spattn run, sweep and plan).
enum class PlanObjective { words, time };
const char* plan_objective_name(PlanObjective objective);  // "words" / "time"
// Parses "words" or "time"; throws InvalidArgument naming the value otherwise.
PlanObjective parse_plan_objective(const std::string& name);

}  // namespace spattn
