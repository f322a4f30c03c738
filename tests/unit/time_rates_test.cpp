// PlanObjective::time's exchange rates (spattn/plan.hpp, time_rates()): the built-in set per flash
// kernel set, the SPATTN_TIME_RATES text over it (every entry, a few, none) and its errors, which
// name the entry and the value. The process-wide choice reads the environment once; the CLI test
// (cli_test.cpp, PlanPrintsTheTimeRatesAndTakesThemFromTheEnvironment) runs it in a child process.
#include "plan/time_rates.hpp"

#include "cpu/kernels/flash_kernels.hpp"

#include <spattn/error.hpp>
#include <spattn/plan.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using spattn::TimeRates;
using spattn::plan_detail::built_in_time_rates;
using spattn::plan_detail::parse_time_rates;
using spattn::schedules::flash_kernels::KernelIsa;

void expect_rates(const TimeRates& rates, double word, double partial, double visit, double step, double flop) {
  EXPECT_EQ(rates.word, word);
  EXPECT_EQ(rates.flash_partial_pair, partial);
  EXPECT_EQ(rates.small_cache_entry_visit, visit);
  EXPECT_EQ(rates.small_cache_walk_step, step);
  EXPECT_EQ(rates.small_cache_flop, flop);
}

TEST(TimeRates, EachKernelSetHasItsFittedSet) {
  // docs/results.md section 4: avx512 fitted on a Sapphire Rapids Xeon, avx2 on a Zen 3 EPYC.
  expect_rates(built_in_time_rates(KernelIsa::avx512), 16, 100, 1200, 4000, 4);
  expect_rates(built_in_time_rates(KernelIsa::avx2), 26, 70, 650, 700, 3);
  const TimeRates portable = built_in_time_rates(KernelIsa::portable);
  expect_rates(portable, 26, 70, 650, 700, 3);  // not fitted on its own: avx2's
  EXPECT_NE(portable.source.find("portable"), std::string::npos) << portable.source;
  EXPECT_NE(built_in_time_rates(KernelIsa::avx512).source.find("avx512"), std::string::npos);
}

TEST(TimeRates, TheProcessPlansWithTheSetOfItsKernelsUnlessTheEnvironmentSaysOtherwise) {
  if (std::getenv("SPATTN_TIME_RATES") != nullptr) GTEST_SKIP() << "SPATTN_TIME_RATES is set for this run";
  const TimeRates expected = built_in_time_rates(spattn::schedules::flash_kernels::kernel_isa());
  const TimeRates& rates = spattn::time_rates();
  expect_rates(rates, expected.word, expected.flash_partial_pair, expected.small_cache_entry_visit,
               expected.small_cache_walk_step, expected.small_cache_flop);
  EXPECT_EQ(rates.source, expected.source);
  EXPECT_EQ(&spattn::time_rates(), &rates);  // decided once
}

TEST(TimeRates, TheEnvironmentTextSetsTheEntriesItNames) {
  const TimeRates base = built_in_time_rates(KernelIsa::avx512);
  expect_rates(parse_time_rates("word=26.5,partial_pair=69,entry_visit=653,walk_step=715,small_cache_flop=3", base),
               26.5, 69, 653, 715, 3);
  // A few entries, in any order: the others keep the base's.
  const TimeRates some = parse_time_rates("walk_step=0,word=1e1", base);
  expect_rates(some, 10, 100, 1200, 0, 4);
  EXPECT_NE(some.source.find("SPATTN_TIME_RATES=walk_step=0,word=1e1"), std::string::npos) << some.source;
  // None: the base, source included.
  const TimeRates none = parse_time_rates("", base);
  expect_rates(none, 16, 100, 1200, 4000, 4);
  EXPECT_EQ(none.source, base.source);
}

TEST(TimeRates, ABadEntryIsAnErrorNamingItAndItsValue) {
  const TimeRates base = built_in_time_rates(KernelIsa::avx2);
  const struct {
    const char* text;
    const char* named;
  } cases[] = {
      {"words=3", "unknown entry 'words=3'"},
      {"word=3,,walk_step=1", "unknown entry ''"},
      {"word", "word = '' must be a finite number >= 0"},
      {"word=", "word = '' must be a finite number >= 0"},
      {"word=fast", "word = 'fast'"},
      {"word=3x", "word = '3x'"},
      {"walk_step=-1", "walk_step = '-1'"},
      {"entry_visit=inf", "entry_visit = 'inf'"},
      {"partial_pair=nan", "partial_pair = 'nan'"},
      {"small_cache_flop=1e999", "small_cache_flop = '1e999'"},
      {"word=1,word=2", "'word' is given twice"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      parse_time_rates(c.text, base);
      ADD_FAILURE() << "accepted";
    } catch (const spattn::InvalidArgument& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("SPATTN_TIME_RATES="), std::string::npos) << message;
      EXPECT_NE(message.find(c.named), std::string::npos) << message;
    }
  }
}

}  // namespace
