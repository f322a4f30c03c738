// A plan (and, when the call was counted, its ledger) as JSON for Python: what ran, the predicted
// and counted words per operand, the peak resident words, the bound and the ratios.
#pragma once

#include <spattn/io.hpp>
#include <spattn/plan.hpp>

#include <string>

namespace spattn::torch_ext {

// ledger == nullptr: the plan alone (a preview).
std::string report_json(const Plan& plan, const io::Ledger* ledger);

}  // namespace spattn::torch_ext
