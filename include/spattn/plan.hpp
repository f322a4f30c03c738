// The planner: for given shapes, masks and fast-memory size M, predict each algorithm's I/O exactly
// (closed form; the tests prove it equal to the counted I/O), choose the algorithm and its tiles,
// and say how the choice compares with the lower bound. A Plan carries what runs (Plan::run), the
// API runs exactly that, and a Plan prints as a report (docs/architecture.md: where choices are
// made).
#pragma once

#include <spattn/bounds.hpp>
#include <spattn/error.hpp>
#include <spattn/mask.hpp>
#include <spattn/types.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spattn {

// The exchange rates of PlanObjective::time, in flops of flash's kernels. A word moved costs
// `word`. Flash's price adds its flops and `flash_partial_pair` per pair of its partial tiles (they
// apply the tile's mask bits pair by pair). The density-adaptive small_cache walks the mask entry
// by entry, so its run is priced by what it does: each entry visit (an entry in one chunk: its
// index and value words, a 16- to 128-wide dot or axpy) costs `small_cache_entry_visit`, each walk
// step (a row checked by a scan, a heap step of a queue) `small_cache_walk_step`, and each of its
// flops `small_cache_flop`. Fitted by least squares to single-thread runs of both algorithms
// (scripts/fit_time_rates.py; docs/results.md gives the fit).
struct TimeRates {
  double word = 0.0;
  double flash_partial_pair = 0.0;
  double small_cache_entry_visit = 0.0;
  double small_cache_walk_step = 0.0;
  double small_cache_flop = 0.0;
  std::string source;  // where they come from: a built-in set (and the machine it was fitted on) or the environment
};
// The rates this process plans with, decided on first use: SPATTN_TIME_RATES when set (e.g.
// "word=26,partial_pair=69,entry_visit=650,walk_step=715,small_cache_flop=3", as
// scripts/fit_time_rates.py prints them for a machine; a rate left out keeps the built-in value;
// InvalidArgument naming the entry when one is unknown, not a number or negative), else the set
// fitted for the flash kernels this CPU runs (avx512, or avx2 and portable): a vector unit half
// as wide doubles the time of a flop, not of a walk step, so one set cannot serve both.
const TimeRates& time_rates();

// One algorithm's prediction for one head.
struct AlgorithmCost {
  bool feasible = false;        // M >= min_cache_words
  int64_t min_cache_words = 0;  // the smallest M its tiles fit in
  // > 0: the most attended pairs it runs over (the density-adaptive small_cache materializes a
  // value per pair); infeasible at every M for a mask with more (`too_large` then set).
  int64_t max_entries = 0;
  bool too_large = false;
  int64_t reads = 0;            // predicted words, per head (0 when infeasible)
  int64_t writes = 0;
  int64_t index_words = 0;      // of reads + writes, the mask-structure (index) words
  std::string tiles;            // e.g. "block_q 56, block_k 3" or "S 16x16x1, O 16x16x1"
  // The run's arithmetic, per head (0 when infeasible): 2 per multiply-add of its products, over
  // every pair of flash's visited tiles and over small_cache's pairs (all of them dense, the
  // mask's entries sparse; CSR inputs are scattered into dense tiles, so the same).
  int64_t flops = 0;
  // PlanObjective::time's price of the run, per head, in flops of flash's kernels (0 where flops
  // is): time_rates().word x words + flops (+ partial-tile pairs), the words being lines x 16
  // for a full mask (memory moves whole lines); for small_cache over a mask its words, entry
  // visits, walk steps and flops at the rates above.
  int64_t time_price = 0;
  // The work terms time_price prices besides the words and flops (0 where they do not apply):
  // flash's pairs of partial tiles; the density-adaptive small_cache's entry visits and walk steps
  // (schedules::estimate_sparse_small_cache_work). Printed by Plan::to_string.
  int64_t partial_pairs = 0;
  int64_t entry_visits = 0;
  int64_t walk_steps = 0;
  // The words above in lines of Plan::line_words words (spattn/io.hpp's line model), per head,
  // where the line model predicts them exactly: flash (dense and block-sparse) and small_cache
  // (dense and density-adaptive), with dense or CSR inputs. Not predicted (lines_predicted false,
  // lines 0) where grouped-query attention's backward adds up dK and dV (kv_sum_reads).
  bool lines_predicted = false;
  int64_t read_lines = 0;
  int64_t write_lines = 0;
  int64_t total() const { return reads + writes; }
  int64_t total_lines() const { return read_lines + write_lines; }
};

namespace detail {
struct PlannedRun;
}

struct Plan {
  Pass pass = Pass::forward;
  bounds::DenseShape shape;     // per head
  int64_t num_heads = 1;        // head problems (batch x heads); counts below are for all of them
  // The heads that `flash`, `small_cache` and `z_qk` cover: 1 (per head), or, when the heads have
  // masks of their own (attention_forward with one Mask per query head), all heads of one batch
  // entry, summed. So reads = cost * num_heads / cost_heads.
  int64_t cost_heads = 1;
  int64_t cache_words = 0;      // M
  Algorithm requested = Algorithm::automatic;
  Algorithm algorithm = Algorithm::flash;  // what runs: requested, or the cheaper when automatic
  PlanObjective objective = PlanObjective::time;  // how the tiles and auto's choice were made over the mask
  AlgorithmCost flash;          // per head
  AlgorithmCost small_cache;    // per head
  int64_t reads = 0;            // predicted, all heads, for `algorithm`
  int64_t writes = 0;
  // The same in lines of line_words words, where `algorithm`'s lines are predicted (AlgorithmCost)
  // and the call adds no grouped-query sums; a counted run's ledger then holds exactly these.
  int64_t line_words = 16;
  bool lines_predicted = false;
  int64_t read_lines = 0;
  int64_t write_lines = 0;
  // Grouped-query attention's backward: the words of adding up dK, dV over each kv head's query
  // heads (after the schedules; included in reads and writes). 0 otherwise.
  int64_t kv_sum_reads = 0;
  int64_t kv_sum_writes = 0;
  bounds::Bound bound;          // all heads (the bound is per head; multiplied by num_heads)
  double compulsory = 0.0;      // all heads
  double ratio_to_bound = 0.0;  // (reads + writes) / bound.value
  double ratio_to_flash = 0.0;  // (reads + writes) / flash's; 0 when flash is infeasible
  // The M at which automatic selection changes algorithm nearest to cache_words (flash's and
  // small_cache's predictions cross there; 0 if they do not cross between the minimum M and
  // 16 * (seqlen * head_dim)). Found by bisection on the predictions.
  int64_t switch_cache_words = 0;
  // Every M at which the choice changes, ascending, when searched (switch_cache_words is the one
  // nearest to cache_words): a mask's density-adaptive costs can cross more than once.
  std::vector<int64_t> switches;
  bool switch_searched = false;
  // Q, K or V given as CSR (sparse_inputs.hpp): the switch is never searched for such plans.
  bool sparse_inputs = false;
  // The heads have masks of their own (one Mask per query head, not all the same): z_qk and the
  // costs are the heads' sums, and the tiles printed are the first mask's.
  bool head_masks = false;

  // The mask. For a full mask the bound is the dense one above (Saha-Ye / Theorem 1.1); for any
  // other mask it is the sparse bound min{Z_input^2/M, Z_input sqrt(Z_QK)/sqrt(M)}, with
  // Z_input = (nnz(Q) + nnz(K)) / 2 (= n d for dense inputs, so the dense bound is the special
  // case) and Z_QK = the mask's attended pairs. The sparse bound is a worst case over masks: a
  // structured mask (a window, block-diagonal documents) can be computed with less, and then
  // ratio_to_bound < 1 is expected, not a violation (beats_worst_case says so).
  bool masked = false;
  int64_t z_qk = 0;                  // attended pairs per head (per cost_heads heads)
  double z_input = 0.0;              // per head
  double theoretical_switch = 0.0;   // d^2 dense; Z_input^2 / Z_QK masked
  bool beats_worst_case = false;     // masked and ratio_to_bound < 1

  // What runs: for each group of query heads (heads sharing one mask), the algorithm, its typed
  // tiles and the prepared mask structures they walk (src/plan/planned_run.hpp). Set by the
  // planner; the runners only read it.
  std::shared_ptr<const detail::PlannedRun> run;

  int64_t total() const { return reads + writes; }
  std::string to_string() const;  // a few aligned lines
};

// Every reported field equal and the same run: the same groups of heads, algorithm, tiles and
// prepared structures. A previewed plan equals the plan the call then returns.
bool operator==(const Plan& a, const Plan& b);
bool operator!=(const Plan& a, const Plan& b);

// Auto's choice between two predictions (feasible or not; at least one feasible): the feasible
// one, or by the objective above (masked: the problem has a mask other than full): the fewer
// lines where both predict them, else the fewer words, or for time over a mask the smaller
// time_price; flash on a tie.
Algorithm choose_algorithm(const AlgorithmCost& flash, const AlgorithmCost& small_cache, bool masked,
                           PlanObjective objective);

// Whether a plan over a mask searches the M where auto's choice switches (Plan::switches): it
// re-predicts both algorithms at about 40 sizes, so previews skip it unless asked.
enum class SwitchSearch { skip, search };

// What plan_heads is asked for. The fields default as the API's options do, except M, which the
// I/O study always states.
struct HeadPlanOptions {
  int64_t cache_words = 0;  // M in words, >= 1
  Algorithm algorithm = Algorithm::automatic;
  int64_t num_heads = 1;    // head problems; the plan's counts are for all of them
  // Whether to search the M where auto's choice switches (Plan::switches). A full mask always has
  // it: searched once per (seqlen_q, seqlen_k, head_dim, head_dim_v, line size, pass, objective)
  // and kept (thread-safe).
  SwitchSearch switch_search = SwitchSearch::skip;
  // What the tiles over a mask and auto's choice minimize (time by default, as the API runs).
  PlanObjective objective = PlanObjective::time;
  // The line size L every tile, choice, switch and prediction is made for (AttentionOptions::
  // line_words; 0 = io::kDefaultLineWords, 1 = the paper's word model).
  int64_t line_words = 0;
};

// Plans `num_heads` float32 head problems over one `mask` (seqlen_q x seqlen_k) at a given M, the
// I/O study's plan (spattn plan / run / sweep): for a full mask the dense flash and small_cache,
// otherwise block-sparse flash and the density-adaptive small_cache, each predicted exactly from
// the mask's structure (the structures are cached in the mask). The heads run as one group; a
// whole call's plan, with batch, grouped-query heads and per-head masks, is previewed by
// spattn/attention.hpp's plan_attention. Throws InvalidArgument for negative sizes, M < 1, a mask
// of another shape, Algorithm::reference, a requested algorithm whose minimum M is above M
// (stating the minimum), and when neither algorithm fits.
Plan plan_heads(const bounds::DenseShape& shape, const Mask& mask, Pass pass, const HeadPlanOptions& options);

}  // namespace spattn
