// The density-adaptive small-cache schedule gives the same bits however it runs: native runs
// bit-identical to counted ones, worker teams to one worker (their words summing to the
// prediction), and the time objective's tiles to the same chunks walked in 1-row blocks with
// 1-column windows (the row block and the window only reorder the walk). Numerics against the
// reference and validation: sparse_small_cache_test.cpp.
#include "support/head_fixture.hpp"
#include "support/sparse_small_cache_runs.hpp"
#include "support/test_helpers.hpp"

#include <sparse_formats/patterns.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace spattn::schedules;
using spattn::io::FastMemory;
using spattn::io::Ledger;
using spattn::testing::expect_equal_outputs;
using spattn::testing::HeadFixture;
using spattn::testing::kSanitized;
using spattn::testing::max_abs;
using spattn::testing::prepare_mask;
using spattn::testing::run_sparse_small_cache_backward;
using spattn::testing::run_sparse_small_cache_forward;
using spattn::testing::widen;

TEST(SparseSmallCache, NativeRunIsBitIdenticalToCountedRun) {
  for (const HeadShape shape : {HeadShape{97, 45, 16, 16}, HeadShape{7, 257, 8, 3}}) {
    const auto mask = sparse_formats::random_pattern(shape.seqlen_q, shape.seqlen_k, 0.15, 9);
    const SparseSmallCacheMask prepared = prepare_mask(mask);
    for (int64_t cache_words : {11, 90, 5000}) {
      HeadFixture counted(shape), native(shape);
      Ledger ledger;
      run_sparse_small_cache_forward(counted, prepared, cache_words, &ledger);
      run_sparse_small_cache_backward(counted, prepared, cache_words, &ledger);
      run_sparse_small_cache_forward(native, prepared, cache_words);
      run_sparse_small_cache_backward(native, prepared, cache_words);
      EXPECT_GT(ledger.reads(), 0);
      expect_equal_outputs(counted, native);
    }
  }
}

// The team schedules (each sweep's row or key blocks split round-robin over workers with fast
// memories of their own) against the one-worker schedule: the same bits for 1, 2 and 3 workers,
// and the words the workers move sum to the prediction. M = 60 and 400 make many blocks per
// sweep (so every worker has some); M = 5000 makes one or two (so some workers have none); the
// time objective's tiles (wider windows, evenly sized blocks) too.
TEST(SparseSmallCache, WorkersGiveTheOneWorkerBitsAndMoveThePredictedWords) {
  for (const HeadShape shape : {HeadShape{97, 45, 16, 16}, HeadShape{257, 7, 8, 3}}) {
    const auto mask = sparse_formats::random_pattern(shape.seqlen_q, shape.seqlen_k, 0.2, 5);
    const SparseSmallCacheMask prepared = prepare_mask(mask);
    for (const auto& [cache_words, objective] :
         {std::pair{int64_t{60}, spattn::PlanObjective::words}, {int64_t{400}, spattn::PlanObjective::words},
          {int64_t{5000}, spattn::PlanObjective::words}, {int64_t{400}, spattn::PlanObjective::time},
          {int64_t{5000}, spattn::PlanObjective::time}}) {
      const auto forward_tiles = sparse_small_cache_tiles(shape, prepared, cache_words, Pass::forward, objective);
      const auto backward_tiles = sparse_small_cache_tiles(shape, prepared, cache_words, Pass::backward, objective);
      HeadFixture one(shape);
      {
        FastMemory forward_fast(cache_words, nullptr, "one forward");
        sparse_small_cache_forward(forward_fast, one.forward(), prepared, forward_tiles);
        FastMemory backward_fast(cache_words, nullptr, "one backward");
        sparse_small_cache_backward(backward_fast, one.backward(), prepared, backward_tiles);
      }
      EXPECT_GT(max_abs(widen(one.dk)), 1e-3);
      for (int workers : {1, 2, 3}) {
        const std::string where = std::to_string(workers) + " workers, M " + std::to_string(cache_words) + ", " +
                                  spattn::plan_objective_name(objective);
        HeadFixture team(shape);
        Ledger forward_ledger, backward_ledger;
        spattn::cpu::WorkerMemories forward_memories(workers, cache_words, &forward_ledger, "f");
        sparse_small_cache_forward(forward_memories, team.forward(), prepared, forward_tiles);
        forward_memories.merge_ledgers();
        spattn::cpu::WorkerMemories backward_memories(workers, cache_words, &backward_ledger, "b");
        sparse_small_cache_backward(backward_memories, team.backward(), prepared, backward_tiles);
        backward_memories.merge_ledgers();
        SCOPED_TRACE(where);
        expect_equal_outputs(team, one);
        const SparseIo forward_words = predict_sparse_small_cache_forward(shape, prepared, forward_tiles);
        const SparseIo backward_words = predict_sparse_small_cache_backward(shape, prepared, backward_tiles);
        EXPECT_EQ(forward_ledger.reads(), forward_words.total().reads) << where;
        EXPECT_EQ(forward_ledger.writes(), forward_words.total().writes) << where;
        EXPECT_EQ(backward_ledger.reads(), backward_words.total().reads) << where;
        EXPECT_EQ(backward_ledger.writes(), backward_words.total().writes) << where;
        EXPECT_LE(backward_ledger.peak_resident(), sparse_small_cache_fast_words(backward_tiles)) << where;
      }
    }
  }
}

// Runs with the time objective's tiles (sparse_small_cache.hpp: wider windows, evenly sized row
// blocks) move the predicted words, and the same runs in 1-row blocks with 1-column windows but
// the same chunks give identical bits: the row block and the window only reorder the walk, the
// chunk alone orders the sums.
TEST(SparseSmallCache, TimeTilesMoveThePredictedWordsAndOnlyTheChunkChangesBits) {
  const int64_t n = kSanitized ? 97 : 257;
  for (const char* spec : {"random:p=0.05,seed=3", "sliding_window:w=9", "causal"}) {
    const SparseSmallCacheMask mask =
        prepare_mask(sparse_formats::make_pattern(sparse_formats::parse_pattern_spec(spec), n, n));
    for (const int64_t cache_words : {11, 400, 20000}) {
      SCOPED_TRACE(std::string(spec) + ", M " + std::to_string(cache_words));
      const HeadShape shape{n, n, 16, 8};
      const auto run = [&](HeadFixture& p, const SparseSmallCacheTiles& forward_tiles,
                           const SparseSmallCacheTiles& backward_tiles) {
        Ledger forward, backward;
        {
          FastMemory fast(cache_words, &forward, "forward");
          sparse_small_cache_forward(fast, p.forward(), mask, forward_tiles);
        }
        {
          FastMemory fast(cache_words, &backward, "backward");
          sparse_small_cache_backward(fast, p.backward(), mask, backward_tiles);
        }
        const IoCount forward_words = predict_sparse_small_cache_forward(shape, mask, forward_tiles).total();
        const IoCount backward_words = predict_sparse_small_cache_backward(shape, mask, backward_tiles).total();
        EXPECT_EQ(forward.reads(), forward_words.reads);
        EXPECT_EQ(forward.writes(), forward_words.writes);
        EXPECT_EQ(backward.reads(), backward_words.reads);
        EXPECT_EQ(backward.writes(), backward_words.writes);
        EXPECT_LE(backward.peak_resident(), cache_words);
      };
      const auto forward_tiles = sparse_small_cache_tiles(shape, mask, cache_words, Pass::forward, spattn::PlanObjective::time);
      const auto backward_tiles =
          sparse_small_cache_tiles(shape, mask, cache_words, Pass::backward, spattn::PlanObjective::time);
      HeadFixture timed(shape);
      run(timed, forward_tiles, backward_tiles);
      EXPECT_GT(max_abs(widen(timed.dk)), 1e-3);
      const auto narrow = [](SparseSmallCacheTiles tiles) {
        for (SparseSweepTiles* sweep :
             {&tiles.scores, &tiles.output, &tiles.probs, &tiles.d_scores, &tiles.dq, &tiles.dk, &tiles.dv}) {
          sweep->block_rows = sweep->block_cols = 1;
        }
        return tiles;
      };
      HeadFixture narrowed(shape);
      run(narrowed, narrow(forward_tiles), narrow(backward_tiles));
      expect_equal_outputs(narrowed, timed);
    }
  }
}

}  // namespace
