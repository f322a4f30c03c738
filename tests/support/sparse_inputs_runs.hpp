// What the sparse-input API tests keep of one forward and backward run, and the checks they share:
// counted == predicted (value and index words, the inputs' own) and every output the same bit for
// bit.
#pragma once

#include "support/sparse_inputs_fixtures.hpp"

#include <spattn/io.hpp>
#include <spattn/plan.hpp>

#include <gtest/gtest.h>

#include <vector>

namespace spattn::testing {

struct RunOutputs {
  std::vector<float> o, lse, dq, dk, dv;
  Plan forward_plan, backward_plan;
  io::Ledger forward_ledger, backward_ledger;
};

// The ledger's reads, writes and index words are the plan's (its algorithm's).
inline void expect_counted_is_predicted(const Plan& plan, const io::Ledger& ledger) {
  EXPECT_EQ(ledger.reads(), plan.reads);
  EXPECT_EQ(ledger.writes(), plan.writes);
  const AlgorithmCost& cost = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  EXPECT_EQ(ledger.total(io::WordKind::index).total(), cost.index_words);
  // Lines too, wherever the plan predicts them (all but grouped-query attention's dK, dV sums).
  if (plan.kv_sum_reads == 0) {
    EXPECT_TRUE(plan.lines_predicted);
  }
  if (plan.lines_predicted) {
    EXPECT_EQ(ledger.total_lines().reads, plan.read_lines);
    EXPECT_EQ(ledger.total_lines().writes, plan.write_lines);
  }
}

// Counted == predicted, and the inputs' index words booked to them (for runs whose Q and K are
// CSR with entries).
inline void expect_counted_with_input_indices(const Plan& plan, const io::Ledger& ledger) {
  expect_counted_is_predicted(plan, ledger);
  EXPECT_GT(ledger.traffic(io::Operand::q, io::WordKind::index).reads, 0);
  EXPECT_GT(ledger.traffic(io::Operand::k, io::WordKind::index).reads, 0);
}

inline void expect_same_outputs(const RunOutputs& a, const RunOutputs& b) {
  expect_same_bits(a.o, b.o, "o");
  expect_same_bits(a.lse, b.lse, "lse");
  expect_same_bits(a.dq, b.dq, "dq");
  expect_same_bits(a.dk, b.dk, "dk");
  expect_same_bits(a.dv, b.dv, "dv");
}

}  // namespace spattn::testing
