// The small-cache attention algorithm (the paper's Algorithm 6 as reconstructed in theory.md
// section 4; details and formulas in docs/small_cache.md): every product with I/O-optimal tiles
// (tiled_matmul.hpp), the n x n intermediates materialized in slow memory, the elementwise steps
// fused into the products where that saves passes. Dense mask, fp32 compute.
//
// Forward (m = seqlen_q, n = seqlen_k):
//   S = scale Q K^T            tiled; S written; the row max and sum are kept online per row
//                              block, so LSE is written at the end of each row block (no pass
//                              over S)
//   O = P V                    tiled; P = exp(S - LSE) computed as S chunks are loaded (P is
//                              never written: that would cost m n writes and m n reads more)
// Backward:
//   D = rowsum(dO ∘ O)         streamed; D written to `delta`
//   P = exp(scale Q K^T - LSE) tiled; P computed on the finished tile, written
//   dS = P ∘ (dO V^T - D)      tiled; dS computed on the finished dP tile (P tile read), written;
//                              dP itself never reaches slow memory
//   dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO     tiled (dS^T, P^T are transposed views)
//
// Tiles come only from small_cache_tiles() (src/plan/dense_small_cache_tiles.cpp); the
// predictions are exact (tests prove counted == predicted for reads and writes separately).
#pragma once

#include "cpu/workers.hpp"
#include "schedules/common/head_problem.hpp"
#include "schedules/common/tiled_matmul.hpp"

#include <spattn/io.hpp>

#include <cstdint>
#include <iosfwd>
#include <vector>

namespace spattn::schedules {

struct SmallCacheTiles {
  Pass pass = Pass::forward;
  HeadShape shape;          // the problem they were chosen for (the schedules check it)
  int64_t cache_words = 0;  // M they were chosen for
  int64_t line_words = 1;   // L they were chosen for (io.hpp's line model)
  MatmulTiles scores;       // S (forward) or P (backward) = scale Q K^T: (m, d) x (d, n)
  MatmulTiles output;       // forward: O = P V: (m, n) x (n, d_v)
  MatmulTiles d_scores;     // backward: dP = dO V^T -> dS: (m, d_v) x (d_v, n)
  MatmulTiles dq;           // backward: (m, n) x (n, d)
  MatmulTiles dk;           // backward: (n, m) x (m, d)
  MatmulTiles dv;           // backward: (n, m) x (m, d_v)
  int64_t delta_rows = 1;   // backward: D pass chunk, rows of dO and O ...
  int64_t delta_cols = 1;   // ... by columns
  friend bool operator==(const SmallCacheTiles& a, const SmallCacheTiles& b) {
    return a.pass == b.pass && a.shape == b.shape && a.cache_words == b.cache_words && a.line_words == b.line_words &&
           a.scores == b.scores && a.output == b.output && a.d_scores == b.d_scores && a.dq == b.dq && a.dk == b.dk &&
           a.dv == b.dv && a.delta_rows == b.delta_rows && a.delta_cols == b.delta_cols;
  }
};
// The pass, what they were chosen for, and each product's tiles (print_tile_list).
std::ostream& operator<<(std::ostream& out, const SmallCacheTiles& tiles);
// Each product's tiles, "S ...; O ..." (forward) or "P ...; dS ...; dQ ...; dK ...; dV ...; D r x c":
// the plan's text (AlgorithmCost::tiles).
std::ostream& print_tile_list(std::ostream& out, const SmallCacheTiles& tiles);

// The smallest M the schedule runs with: 5 words forward (1 x 1 tiles, one word each of A and B,
// row max and sum), 4 backward (1 x 1 tiles and one row statistic, LSE or D). Independent of the
// shape.
int64_t small_cache_min_cache_words(const HeadShape& shape, Pass pass);

// The most words the schedule ever holds in fast memory with these tiles (<= cache_words).
int64_t small_cache_fast_words(const SmallCacheTiles& tiles);

// small_cache's flops over `pairs` computed pairs, 2 per multiply-add (flash_flops.hpp's table):
// forward 2 (d + e) per pair (S, O), backward 6 d + 4 e (P, dP, dQ, dK, dV). `pairs` is
// seqlen_q x seqlen_k for the dense schedule, the mask's nnz for the density-adaptive one. O(1).
int64_t small_cache_flops(const HeadShape& shape, int64_t pairs, Pass pass);

// Exact words moved (closed form; docs/small_cache.md). `shape` must be tiles.shape.
IoCount predict_small_cache_forward(const HeadShape& shape, const SmallCacheTiles& tiles);
IoCount predict_small_cache_backward(const HeadShape& shape, const SmallCacheTiles& tiles);
// Exact lines moved, lines of `line_words` words (io.hpp's rule; docs/io_model.md), for operands
// that are dense row-major arrays of their head (row stride = width), as contiguous (batch, heads,
// seqlen, head_dim) tensors give.
IoCount predict_small_cache_forward_lines(const HeadShape& shape, const SmallCacheTiles& tiles,
                                          int64_t line_words);
IoCount predict_small_cache_backward_lines(const HeadShape& shape, const SmallCacheTiles& tiles,
                                           int64_t line_words);

// The schedules. Scratch slow memory for the n x n intermediates (S; P and dS) is owned by the
// call. Throw InvalidArgument when the operands' shapes disagree with each other; tiles chosen
// for another shape or pass are a caller's bug (asserted); RuntimeError when fast memory has fewer
// than small_cache_fast_words(tiles) words free. Either way before anything is written.
void small_cache_forward(io::FastMemory& fast, const HeadForward& head,
                         const SmallCacheTiles& tiles);
void small_cache_backward(io::FastMemory& fast, const HeadBackward& head,
                          const SmallCacheTiles& tiles);

// The same schedules on a team of workers, one thread and one fast memory each (the model: M per
// core): every product's row blocks, and the D pass's row chunks, are split round-robin over the
// workers, the products running one after another (each reads what the one before wrote). Each
// output tile is computed by one worker exactly as in the one-worker schedule, so the results are
// bit-identical for any number of workers, and the words the workers move sum to the
// prediction (each worker's peak is at most small_cache_fast_words). Checks as above, on every
// worker's fast memory.
void small_cache_forward(cpu::WorkerMemories& workers, const HeadForward& head,
                         const SmallCacheTiles& tiles);
void small_cache_backward(cpu::WorkerMemories& workers, const HeadBackward& head,
                          const SmallCacheTiles& tiles);

namespace small_cache_detail {
// Shared by the schedules and the predictions: tiles are for `pass` and for `shape`
// (InvalidArgument otherwise), and `fast` has room for them (RuntimeError otherwise).
void check_tiles(const char* where, const HeadShape& shape, const SmallCacheTiles& tiles,
                 Pass pass);
void check_room(const char* where, const io::FastMemory& fast, const SmallCacheTiles& tiles);
// The fast memories of a team (one per worker), or of the one-worker schedule.
using Memories = std::vector<io::FastMemory*>;
inline Memories memories_of(cpu::WorkerMemories& workers) {
  Memories memories;
  for (int worker = 0; worker < workers.size(); ++worker) memories.push_back(&workers[worker]);
  return memories;
}
// Runs body(fast, worker) for every worker, each on its own thread and fast memory.
template <typename Body>
void run_on(const Memories& memories, Body&& body) {
  const int workers = static_cast<int>(memories.size());
  cpu::run_workers(workers,
                   [&](int worker) { body(*memories[static_cast<size_t>(worker)], worker); });
}
// The share of a product that worker `worker` of `workers` computes.
inline MatmulOptions share(MatmulOptions options, int worker, int workers) {
  options.first_row_block = worker;
  options.row_block_step = workers;
  return options;
}
// Row statistics each product keeps resident per tile row (the schedules allocate exactly these).
inline constexpr int64_t kForwardScoresRowWords = 2;    // running row max and row sum
inline constexpr int64_t kForwardOutputRowWords = 1;    // LSE, for P = exp(S - LSE) on load
inline constexpr int64_t kBackwardScoresRowWords = 1;   // LSE, for P = exp(S - LSE) on store
inline constexpr int64_t kBackwardDScoresRowWords = 1;  // D, for dS = P ∘ (dP - D) on store
// How the products' operands lie: S = Q K^T and dP = dO V^T read B transposed; dK = dS^T Q and
// dV = P^T dO read A transposed; O = P V and dQ = dS K read both row-major.
inline constexpr MatmulLayout kScoresLayout{false, true};
inline constexpr MatmulLayout kRowMajor{false, false};
inline constexpr MatmulLayout kTransposedA{true, false};
}  // namespace small_cache_detail

}  // namespace spattn::schedules
