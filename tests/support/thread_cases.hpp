// What the tests of native execution on several threads run (api/threads_test.cpp: the same bits
// and the reference; api/threads_words_test.cpp: the words): their problems, masks and traces.
#pragma once

#include "support/api_problem.hpp"

#include <spattn/plan.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::testing {

// batch x heads heads of n x n, head_dim d, from the seeds 11 to 14.
inline ApiProblem threads_problem(int64_t batch, int64_t heads, int64_t n, int64_t d) {
  return ApiProblem(batch, heads, heads, n, n, d, 11);
}

// Dense, causal, a band, documents with an empty one, random.
inline const std::vector<std::string>& threads_mask_specs() {
  static const std::vector<std::string> specs = {
      "full",
      "causal",
      "sliding_window:w=9",
      "documents:lengths=30/0/40/27,causal=1",
      "random:p=0.1,seed=4",
  };
  return specs;
}

inline std::string describe_threads_run(const std::string& spec, Algorithm algorithm, int threads) {
  return spec + " " + algorithm_name(algorithm) + " threads " + std::to_string(threads);
}

}  // namespace spattn::testing
