// PlanObjective::time's rates (spattn/plan.hpp): one built-in set per flash kernel set, each fitted
// on one machine by scripts/fit_time_rates.py, or the environment's (SPATTN_TIME_RATES).
#include "plan/time_rates.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace spattn {

namespace plan_detail {

TimeRates built_in_time_rates(schedules::flash_kernels::KernelIsa isa) {
  using schedules::flash_kernels::KernelIsa;
  TimeRates rates;
  if (isa == KernelIsa::avx512 || isa == KernelIsa::avx512_bf16) {
    // Intel Xeon (Sapphire Rapids class, KVM guest), 2026-12-01: docs/results.md section 4. (The
    // avx512_bf16 set is the avx512 one on float32 tiles, where these were fitted.)
    rates.word = 16;
    rates.flash_partial_pair = 100;
    rates.small_cache_entry_visit = 1200;
    rates.small_cache_walk_step = 4000;
    rates.small_cache_flop = 4;
    rates.source = "built in for the avx512 kernels (fitted on a Sapphire Rapids Xeon)";
    return rates;
  }
  // AMD EPYC (Zen 3, KVM guest, AVX2), 2026-12-01: docs/results.md section 4, "Rates per machine".
  rates.word = 26;
  rates.flash_partial_pair = 70;
  rates.small_cache_entry_visit = 650;
  rates.small_cache_walk_step = 700;
  rates.small_cache_flop = 3;
  rates.source = std::string("built in for the ") + schedules::flash_kernels::kernel_isa_name(isa) +
                 " kernels (fitted on a Zen 3 EPYC" + (isa == KernelIsa::avx2 ? ")" : " with the avx2 kernels)");
  return rates;
}

TimeRates parse_time_rates(const std::string& text, TimeRates rates) {
  struct Entry {
    const char* name;
    double TimeRates::*rate;
    bool seen;
  };
  Entry entries[] = {{"word", &TimeRates::word, false},
                     {"partial_pair", &TimeRates::flash_partial_pair, false},
                     {"entry_visit", &TimeRates::small_cache_entry_visit, false},
                     {"walk_step", &TimeRates::small_cache_walk_step, false},
                     {"small_cache_flop", &TimeRates::small_cache_flop, false}};
  const char* what = "SPATTN_TIME_RATES";
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    begin = end + 1;
    const size_t equals = item.find('=');
    const std::string name = item.substr(0, equals);
    Entry* entry = nullptr;
    for (Entry& candidate : entries) {
      if (name == candidate.name) entry = &candidate;
    }
    if (entry == nullptr) {
      fail(what, "=", text, ": unknown entry '", item,
           "' (valid: word, partial_pair, entry_visit, walk_step, small_cache_flop, as name=value)");
    }
    if (entry->seen) fail(what, "=", text, ": '", name, "' is given twice");
    entry->seen = true;
    const std::string value = equals == std::string::npos ? std::string() : item.substr(equals + 1);
    char* parsed_end = nullptr;
    errno = 0;
    const double rate = std::strtod(value.c_str(), &parsed_end);
    if (value.empty() || *parsed_end != '\0' || errno != 0 || !std::isfinite(rate) || rate < 0.0) {
      fail(what, "=", text, ": ", name, " = '", value, "' must be a finite number >= 0");
    }
    rates.*(entry->rate) = rate;
  }
  if (!text.empty()) rates.source = std::string(what) + "=" + text + " (over the " + rates.source + ")";
  return rates;
}

}  // namespace plan_detail

namespace {

TimeRates process_time_rates() {
  const TimeRates built_in = plan_detail::built_in_time_rates(schedules::flash_kernels::kernel_isa());
  const char* text = std::getenv("SPATTN_TIME_RATES");
  return text == nullptr ? built_in : plan_detail::parse_time_rates(text, built_in);
}

}  // namespace

const TimeRates& time_rates() {
  // Once per process (a Mask caches tiles chosen at these rates); a bad SPATTN_TIME_RATES throws
  // at every call, as nothing is stored.
  static const TimeRates rates = process_time_rates();
  return rates;
}

}  // namespace spattn
