// Native execution on several threads (AttentionOptions::threads) moves the words the plan
// predicts: counted == predicted with the workers' ledgers merged, also when small_cache splits
// one head over the team (fewer heads than threads, sparse inputs), with the same bits as one
// thread there. The same bits in general, the reference and the argument checks: threads_test.cpp.
#include <spattn/attention.hpp>
#include <spattn/sparse_inputs.hpp>

#include "support/api_problem.hpp"
#include "support/compare.hpp"
#include "support/sparse_inputs_fixtures.hpp"
#include "support/thread_cases.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

using spattn::Algorithm;
using spattn::AttentionOptions;
using spattn::Mask;
using spattn::TensorView;
using spattn::testing::ApiProblem;
using spattn::testing::describe_threads_run;
using spattn::testing::expect_same_bits;
using spattn::testing::threads_mask_specs;
using spattn::testing::threads_problem;

namespace {

// Counted == predicted with the workers' ledgers merged; each worker's fast memory is its own, so
// the peak is one worker's, within M.
void expect_counted_is_predicted(const spattn::io::Ledger& ledger, const spattn::Plan& plan, int64_t cache_words) {
  EXPECT_EQ(ledger.reads(), plan.reads);
  EXPECT_EQ(ledger.writes(), plan.writes);
  EXPECT_GT(ledger.reads(), 0);
  EXPECT_LE(ledger.peak_resident(), cache_words);
  EXPECT_GT(ledger.peak_resident(), 0);
}

}  // namespace

TEST(Threads, CountedEqualsPredictedWhenTheWorkersLedgersAreMerged) {
  for (const std::string& spec : threads_mask_specs()) {
    const Mask mask = Mask::from_spec(spec, 97, 97);
    for (Algorithm algorithm : {Algorithm::flash, Algorithm::small_cache}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(describe_threads_run(spec, algorithm, threads));
        ApiProblem p = threads_problem(2, 2, 97, 12);
        AttentionOptions forward_options, backward_options;
        spattn::io::Ledger forward_ledger, backward_ledger;
        forward_options.algorithm = backward_options.algorithm = algorithm;
        forward_options.cache_words = backward_options.cache_words = 700;
        forward_options.threads = backward_options.threads = threads;
        forward_options.ledger = &forward_ledger;
        backward_options.ledger = &backward_ledger;
        const auto [forward_plan, backward_plan] = p.run({mask}, forward_options, backward_options);
        expect_counted_is_predicted(forward_ledger, forward_plan, 700);
        expect_counted_is_predicted(backward_ledger, backward_plan, 700);
      }
    }
  }
}

TEST(Threads, SmallCacheWithFewerHeadsThanThreadsSplitsEachHeadWithTheSameBitsAndWords) {
  // 1 and 2 heads on up to 4 threads: each head's row blocks (the dense schedule's products, the
  // density-adaptive schedule's sweeps over a mask) are split over the whole team
  // (head_runner.cpp). M = 700 makes several row blocks per product or sweep at n = 97.
  const std::vector<Mask> masks{Mask::full(97, 97), Mask::from_spec("random:p=0.1,seed=4", 97, 97)};
  for (const Mask& mask : masks) {
    for (int64_t heads : {1, 2}) {
      ApiProblem one = threads_problem(1, heads, 97, 20);
      AttentionOptions options;
      options.algorithm = Algorithm::small_cache;
      options.cache_words = 700;
      options.threads = 1;
      one.run({mask}, options);
      EXPECT_GT(spattn::testing::max_abs(std::vector<double>(one.dq.begin(), one.dq.end())), 1e-3);
      for (int threads : {2, 3, 4}) {
        SCOPED_TRACE(std::string(mask.is_full() ? "full" : "random") + ", " + std::to_string(heads) +
                     " heads, threads " + std::to_string(threads));
        ApiProblem many = threads_problem(1, heads, 97, 20);
        AttentionOptions forward_options = options, backward_options = options;
        spattn::io::Ledger forward_ledger, backward_ledger;
        forward_options.threads = backward_options.threads = threads;
        forward_options.ledger = &forward_ledger;
        backward_options.ledger = &backward_ledger;
        const auto [forward_plan, backward_plan] = many.run({mask}, forward_options, backward_options);
        expect_same_bits(one, many);
        EXPECT_EQ(forward_plan.algorithm, Algorithm::small_cache);
        expect_counted_is_predicted(forward_ledger, forward_plan, 700);
        expect_counted_is_predicted(backward_ledger, backward_plan, 700);
      }
    }
  }
}

TEST(Threads, SmallCacheOnSparseInputsSplitsTheHeadWithTheSameBitsAndWords) {
  // Sparse (CSR) inputs are one head per call: on 3 threads small_cache splits it over the team;
  // the value and index words still sum to the plan's.
  using spattn::testing::SparseInput;
  const int64_t n = 97, d = 12;
  const SparseInput q = spattn::testing::sparse_input(n, d, 0.4, 41, 3);
  const SparseInput k = spattn::testing::sparse_input(n, d, 0.4, 42);
  const SparseInput v = spattn::testing::sparse_input(n, d, 0.4, 43);
  const std::vector<float> d_o = spattn::testing::random_floats(n * d, 44);
  const spattn::AttentionInputs inputs{spattn::AttentionInput::csr(q.csr.view()),
                                       spattn::AttentionInput::csr(k.csr.view()),
                                       spattn::AttentionInput::csr(v.csr.view())};
  const Mask full = Mask::full(n, n);
  struct Run {
    std::vector<float> o, lse, dq, dk, dv;
    spattn::io::Ledger forward_ledger, backward_ledger;
    spattn::Plan forward_plan, backward_plan;
  };
  const auto run = [&](int threads) {
    auto result = std::make_unique<Run>();
    Run& r = *result;
    const auto size = static_cast<size_t>(n * d);
    r.o.assign(size, 7.0f);
    r.lse.assign(static_cast<size_t>(n), 7.0f);
    r.dq.assign(size, 7.0f);
    r.dk.assign(size, 7.0f);
    r.dv.assign(size, 7.0f);
    AttentionOptions options;
    options.algorithm = Algorithm::small_cache;
    options.cache_words = 600;
    options.threads = threads;
    const auto matrix = [&](std::vector<float>& x, int64_t cols) { return TensorView<float>::matrix(x.data(), n, cols); };
    const auto input = [&](const std::vector<float>& x, int64_t cols) {
      return TensorView<const float>::matrix(x.data(), n, cols);
    };
    options.ledger = &r.forward_ledger;
    r.forward_plan = spattn::attention_forward(inputs, matrix(r.o, d), matrix(r.lse, 1), full, options);
    options.ledger = &r.backward_ledger;
    r.backward_plan = spattn::attention_backward(inputs, input(r.o, d), input(r.lse, 1), input(d_o, d), matrix(r.dq, d),
                                                 matrix(r.dk, d), matrix(r.dv, d), full, options);
    return result;
  };
  const auto one = run(1);
  EXPECT_GT(spattn::testing::max_abs(std::vector<double>(one->dk.begin(), one->dk.end())), 1e-3);
  const auto three = run(3);
  for (const auto& [a, b, what] : {std::tuple{&one->o, &three->o, "o"}, std::tuple{&one->lse, &three->lse, "lse"},
                                   std::tuple{&one->dq, &three->dq, "dq"}, std::tuple{&one->dk, &three->dk, "dk"},
                                   std::tuple{&one->dv, &three->dv, "dv"}}) {
    spattn::testing::expect_same_bits(*a, *b, what);
  }
  for (const auto& [ledger, plan] : {std::pair{&three->forward_ledger, &three->forward_plan},
                                     std::pair{&three->backward_ledger, &three->backward_plan}}) {
    EXPECT_EQ(plan->algorithm, Algorithm::small_cache);
    expect_counted_is_predicted(*ledger, *plan, 600);
    EXPECT_EQ(ledger->total(spattn::io::WordKind::index).total(), plan->small_cache.index_words);
    EXPECT_GT(plan->small_cache.index_words, 0);
  }
}
