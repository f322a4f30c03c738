// One benchmark case of spattn_bench: a mask at a sequence length and head dim, run natively
// (no ledger) through the public API with one algorithm; forward, backward and fwd+bwd timed in
// the same repetitions, the median kept.
#pragma once

#include <spattn/attention.hpp>
#include <spattn/mask.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spattn::bench {

// A named mask of the benchmark (`full`, `causal`, `window`, ...) and its PATTERN-SPEC.
struct MaskChoice {
  std::string name;
  std::string spec;
};
// The named masks, in table order.
const std::vector<MaskChoice>& standard_masks();
// A name from standard_masks(), or any PATTERN-SPEC (then name = spec).
MaskChoice parse_mask_choice(const std::string& text);
// --masks' arguments split at their commas into names and specs, where a comma also separates a
// spec's parameters: a piece with '=' and no ':' ("dilation=4", "seed=3") continues the spec
// before it, so "dilated_window:w=64,dilation=4,causal" is two masks. (Pattern and standard names
// hold no '=', so no mask can start that way.)
std::vector<std::string> split_mask_list(const std::vector<std::string>& arguments);

inline constexpr int kMaxRepetitions = 1000;

struct RunSettings {
  int threads = 0;            // AttentionOptions::threads (0 = hardware concurrency)
  int repetitions = 3;        // timed repetitions (after one warm-up); the median is reported
  double max_seconds = 30.0;  // stop repeating once a case has taken this long (>= 1 repetition)
  // keep repeating past `repetitions` until a case has taken this long (at most
  // kMaxRepetitions): sub-millisecond cases get enough repetitions for a stable median
  double min_seconds = 0.1;
  int64_t cache_words = 0;    // AttentionOptions::cache_words (0 = default_cache_words())
  int64_t line_words = 0;     // AttentionOptions::line_words (0 = 16)
  int64_t heads = 1;          // heads of the problem (batch 1)
};

// Q, K, V, dO of (1, heads, seqlen, head_dim), uniform in [-1, 1), and the outputs.
class SpeedProblem {
 public:
  SpeedProblem(int64_t heads, int64_t seqlen, int64_t head_dim, uint64_t seed);
  int64_t seqlen() const { return seqlen_; }
  int64_t head_dim() const { return head_dim_; }
  // One forward / backward with `options`; returns the plan that ran.
  Plan forward(const Mask& mask, const AttentionOptions& options);
  Plan backward(const Mask& mask, const AttentionOptions& options);

 private:
  TensorView<const float> in(const std::vector<float>& x) const;
  TensorView<float> out(std::vector<float>& x, int64_t last) ;
  int64_t heads_, seqlen_, head_dim_;
  std::vector<float> q_, k_, v_, d_o_, o_, lse_, dq_, dk_, dv_;
};

struct CaseResult {
  std::string mask;       // the mask's name
  int64_t seqlen = 0;
  int64_t head_dim = 0;
  int64_t heads = 1;
  int threads = 1;        // resolved
  int64_t cache_words = 0;  // M the case ran with (resolved: never 0)
  double density = 0.0;   // |Omega| / n^2
  int64_t nnz = 0;        // |Omega| per head
  Algorithm requested = Algorithm::automatic;
  Algorithm forward_ran = Algorithm::flash;   // what the plan chose
  Algorithm backward_ran = Algorithm::flash;
  int repetitions = 0;
  double forward_s = 0.0;   // medians
  double backward_s = 0.0;
  double both_s = 0.0;
  // fwd, bwd and fwd+bwd of each timed repetition, in order: the i-th entries of the slots of
  // one run_case call ran in the same repetition, side by side (the window and auto targets pair
  // them).
  std::vector<double> forward_runs_s, backward_runs_s, both_runs_s;
  // plan_attention for both passes, as the API calls it (included in the times above).
  double plan_s = 0.0;
  // GFLOP/s on attended pairs: forward 4 |Omega| d, backward 10 |Omega| d, per head.
  double forward_gflops() const;
  double backward_gflops() const;
  double both_gflops() const;
};

// One way to run a case: a mask, an algorithm, a fast-memory size (0 = the default). The slots
// of one run_case call may hold different masks (--window-target times full and window together).
struct CaseSlot {
  MaskChoice choice;
  Mask mask;  // a handle: copies share the mask's cached schedule structures
  Algorithm algorithm = Algorithm::automatic;
  int64_t cache_words = 0;
};

// Runs `problem` (n, d) in every slot, the slots taking turns within each repetition (slot 1
// fwd+bwd, slot 2 fwd+bwd, ..., the next repetition starting one slot later), so that a change
// of the machine's load during the run falls on all of them alike; the medians are compared.
// Each slot gets one warm-up first. Repeats settings.repetitions times, or fewer once the run
// has taken settings.max_seconds per slot (at least once). One result per slot, in slot order.
std::vector<CaseResult> run_case(SpeedProblem& problem, const std::vector<CaseSlot>& slots,
                                 const RunSettings& settings);

// The median of `values` (the mean of the middle two for an even count); values not empty.
double median(std::vector<double> values);

// The thread count AttentionOptions::threads = `threads` resolves to.
int resolved_threads(int threads);

}  // namespace spattn::bench
