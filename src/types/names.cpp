// The names of the shared vocabulary (spattn/types.hpp), printed and parsed.
#include <spattn/types.hpp>

#include <spattn/error.hpp>

namespace spattn {

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::automatic: return "auto";
    case Algorithm::reference: return "reference";
    case Algorithm::flash: return "flash";
    case Algorithm::small_cache: return "small_cache";
  }
  return "?";
}

Algorithm parse_algorithm(const std::string& name) {
  for (Algorithm a : {Algorithm::automatic, Algorithm::reference, Algorithm::flash,
                      Algorithm::small_cache}) {
    if (name == algorithm_name(a)) return a;
  }
  fail("algorithm: '", name, "' is not one of auto, reference, flash, small_cache");
}

const char* pass_name(Pass pass) { return pass == Pass::forward ? "forward" : "backward"; }

const char* plan_objective_name(PlanObjective objective) {
  return objective == PlanObjective::words ? "words" : "time";
}

PlanObjective parse_plan_objective(const std::string& name) {
  if (name == "words") return PlanObjective::words;
  if (name == "time") return PlanObjective::time;
  fail("tile objective: '", name, "' is not one of words, time");
}

}  // namespace spattn
