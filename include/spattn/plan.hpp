// The planner: for given shapes and fast-memory size M, predict each algorithm's I/O exactly
// (closed form, proven equal to the counted I/O by the tests), pick the cheaper, and say how it
// compares with the lower bound. It is the only place tile sizes are chosen (through the
// schedules' tile functions). A Plan is a printable struct.
#pragma once

#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

#include <cstdint>
#include <string>

namespace spattn {

enum class Algorithm {
  automatic,    // the smaller predicted I/O of flash and small_cache
  reference,    // the fp64 oracle (not counted)
  flash,        // FlashAttention tiling, the large-cache regime (M >= about d^2)
  small_cache,  // the paper's materialize-and-tile algorithm, the small-cache regime
};
const char* algorithm_name(Algorithm algorithm);  // "auto", "reference", "flash", "small_cache"
// Parses a name as printed by algorithm_name; throws InvalidArgument listing the valid names.
Algorithm parse_algorithm(const std::string& name);

enum class Pass { forward, backward };
const char* pass_name(Pass pass);  // "forward" / "backward"

// One algorithm's prediction for one head.
struct AlgorithmCost {
  bool feasible = false;        // M >= min_cache_words
  int64_t min_cache_words = 0;  // the smallest M its tiles fit in
  int64_t reads = 0;            // predicted words, per head (0 when infeasible)
  int64_t writes = 0;
  std::string tiles;            // e.g. "block_q 56, block_k 3" or "S 16x16x1, O 16x16x1"
  int64_t total() const { return reads + writes; }
};

struct Plan {
  Pass pass = Pass::forward;
  bounds::DenseShape shape;     // per head
  int64_t num_heads = 1;        // head problems (batch x heads); counts below are for all of them
  int64_t cache_words = 0;      // M
  Algorithm requested = Algorithm::automatic;
  Algorithm algorithm = Algorithm::flash;  // what runs: requested, or the cheaper when automatic
  AlgorithmCost flash;          // per head
  AlgorithmCost small_cache;    // per head
  int64_t reads = 0;            // predicted, all heads, for `algorithm`
  int64_t writes = 0;
  bounds::Bound bound;          // all heads (the bound is per head; multiplied by num_heads)
  double compulsory = 0.0;      // all heads
  double ratio_to_bound = 0.0;  // (reads + writes) / bound.value
  double ratio_to_flash = 0.0;  // (reads + writes) / flash's; 0 when flash is infeasible
  // The M at which automatic selection changes algorithm nearest to cache_words (flash's and
  // small_cache's predictions cross there; 0 if they do not cross between the minimum M and
  // 16 * (seqlen * head_dim)). Found by bisection on the predictions.
  int64_t switch_cache_words = 0;

  int64_t total() const { return reads + writes; }
  std::string to_string() const;  // a few aligned lines
};

// Plans a dense (full-mask) head problem. Throws InvalidArgument for negative sizes, M < 1, or a
// requested algorithm whose minimum M is above cache_words (stating the minimum), and when
// neither algorithm fits.
Plan plan_dense(const bounds::DenseShape& shape, int64_t cache_words, Pass pass,
                Algorithm requested = Algorithm::automatic, int64_t num_heads = 1);

}  // namespace spattn
