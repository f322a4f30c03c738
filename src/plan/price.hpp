// Prices of the time objective (spattn/plan.hpp, PlanObjective::time), in flops of flash's
// kernels: computed in double, rounded and saturated.
#pragma once

#include <cstdint>

namespace spattn::plan_detail {

// A time price rounded and saturated at INT64_MAX: the prices of very large problems (n 131072
// at the smallest M, many heads) pass 2^63, and a wrapped price would flip auto's choice.
inline int64_t saturated_price(double price) {
  constexpr double kLimit = 9.2e18;  // just below 2^63
  if (!(price < kLimit)) return INT64_MAX;  // (NaN too)
  return price <= 0.0 ? 0 : static_cast<int64_t>(price + 0.5);
}

}  // namespace spattn::plan_detail
