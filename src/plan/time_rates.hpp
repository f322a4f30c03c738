// PlanObjective::time's rates (spattn/plan.hpp, time_rates()): the built-in sets and the parser of
// SPATTN_TIME_RATES, apart from the process-wide choice so that the tests can call them directly.
#pragma once

#include "cpu/kernels/flash_kernels.hpp"

#include <spattn/plan.hpp>

#include <string>

namespace spattn::plan_detail {

// The set fitted for the flash kernels `isa` (portable takes avx2's: not fitted on its own).
TimeRates built_in_time_rates(schedules::flash_kernels::KernelIsa isa);

// `text` ("word=26,partial_pair=69,...": entries word, partial_pair, entry_visit, walk_step,
// small_cache_flop, each at most once, separated by commas) over `defaults`. Throws
// InvalidArgument naming the entry that is unknown, repeated, not a number, negative or not
// finite; an empty text changes nothing.
TimeRates parse_time_rates(const std::string& text, TimeRates defaults);

}  // namespace spattn::plan_detail
