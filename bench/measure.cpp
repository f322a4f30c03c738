#include "measure.hpp"

#include "cli_support.hpp"

#include <spattn/attention.hpp>
#include <spattn/error.hpp>
#include <spattn/io.hpp>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <limits>

namespace spattn::cli {

namespace {

// The I/O study plans, and counts, for the fewest words (spattn/plan.hpp, PlanObjective).
Plan plan_for_words(const bounds::DenseShape& shape, const Mask& mask, int64_t cache_words, int64_t line_words,
                    Pass pass, Algorithm requested, SwitchSearch switch_search = SwitchSearch::skip) {
  HeadPlanOptions planning;
  planning.cache_words = cache_words;
  planning.algorithm = requested;
  planning.switch_search = switch_search;
  planning.objective = PlanObjective::words;
  planning.line_words = line_words;
  return plan_heads(shape, mask, pass, planning);
}

std::vector<float> random_values(size_t count, uint64_t seed) {
  std::vector<float> values(count);
  uint64_t state = seed;
  for (float& value : values) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    value = static_cast<float>(static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  }
  return values;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// error / tolerance for one output, with the rule of tests/support/compare.hpp and docs/io_model.md:
// tolerance = 8 eps_f32 (head_dim + seqlen_k) max(1, max|x|). Infinities must match exactly (lse of
// an empty row); a NaN, or a size mismatch, is an infinite error.
struct Comparison {
  double error = 0.0;
  double ratio = 0.0;
};
Comparison compare(const std::vector<float>& actual, const std::vector<double>& expected, int64_t terms) {
  const double inf = std::numeric_limits<double>::infinity();
  if (actual.size() != expected.size()) return {inf, inf};
  double worst = 0.0, magnitude = 0.0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = static_cast<double>(actual[i]);
    const double e = expected[i];
    if (std::isnan(a) || std::isnan(e)) return {inf, inf};
    if (std::isinf(a) || std::isinf(e)) {
      if (a != e) return {inf, inf};
      continue;
    }
    worst = std::max(worst, std::fabs(a - e));
    magnitude = std::max(magnitude, std::fabs(e));
  }
  const double tolerance = 8.0 * static_cast<double>(FLT_EPSILON) * static_cast<double>(std::max<int64_t>(terms, 1)) *
                           std::max(1.0, magnitude);
  return {worst, worst / tolerance};
}

void add_comparison(Row& row, const Comparison& c) {
  row.max_error = std::max(row.max_error.value_or(0.0), c.error);
  row.error_to_tolerance = std::max(row.error_to_tolerance.value_or(0.0), c.ratio);
}

// Adds one pass's plan (and counts) to the row.
void add_pass(Row& row, const Plan& plan, Pass pass, bool first) {
  const std::string name = algorithm_name(plan.algorithm);
  (pass == Pass::forward ? row.algorithm_forward : row.algorithm_backward) = name;
  row.predicted_reads += plan.reads;
  row.predicted_writes += plan.writes;
  // Lines are predicted for the row when they are for every pass in it.
  if (plan.lines_predicted && (first || row.predicted_read_lines)) {
    row.predicted_read_lines = row.predicted_read_lines.value_or(0) + plan.read_lines;
    row.predicted_write_lines = row.predicted_write_lines.value_or(0) + plan.write_lines;
  } else {
    row.predicted_read_lines.reset();
    row.predicted_write_lines.reset();
  }
  auto add_cost = [first](std::optional<int64_t>& sum, const AlgorithmCost& cost) {
    if (!cost.feasible) {
      sum.reset();
    } else if (first || sum) {
      sum = sum.value_or(0) + cost.total();
    }
  };
  add_cost(row.flash_io, plan.flash);
  add_cost(row.small_cache_io, plan.small_cache);
  row.bound += plan.bound.value;
  row.bound_large_cache += plan.bound.large_cache;
  row.bound_small_cache += plan.bound.small_cache;
  row.bound_crossover = plan.theoretical_switch;
  row.masked = plan.masked;
  if (plan.switch_searched && plan.switch_cache_words > 0) {
    (pass == Pass::forward ? row.switch_forward : row.switch_backward) = plan.switch_cache_words;
    (pass == Pass::forward ? row.switches_forward : row.switches_backward) = plan.switches;
  }
}

struct Outputs {
  std::vector<float> o, lse, dq, dk, dv;
  explicit Outputs(const Problem& p)
      : o(static_cast<size_t>(p.seqlen() * p.head_dim())), lse(static_cast<size_t>(p.seqlen())),
        dq(o.size()), dk(o.size()), dv(o.size()) {}
  TensorView<float> matrix(std::vector<float>& x, int64_t cols) const {
    return TensorView<float>::matrix(x.data(), static_cast<int64_t>(x.size()) / std::max<int64_t>(cols, 1), cols);
  }
};

// Words always; lines where the plan predicts them.
void check_counts(const io::Ledger& ledger, const Plan& plan, const RowRequest& request, Pass pass) {
  const io::Traffic lines = ledger.total_lines();
  if (plan.lines_predicted && (lines.reads != plan.read_lines || lines.writes != plan.write_lines)) {
    throw RuntimeError(std::string("counted lines differ from the prediction: ") + pass_name(pass) + " " +
                       algorithm_name(plan.algorithm) + " on " + request.pattern + " at M = " +
                       std::to_string(request.cache_words) + ": counted " + std::to_string(lines.reads) +
                       " read lines, " + std::to_string(lines.writes) + " written; predicted " +
                       std::to_string(plan.read_lines) + ", " + std::to_string(plan.write_lines) +
                       " (a schedule and its prediction disagree; please report)");
  }
  if (ledger.reads() == plan.reads && ledger.writes() == plan.writes) return;
  throw RuntimeError(std::string("counted I/O differs from the prediction: ") + pass_name(pass) + " " +
                     algorithm_name(plan.algorithm) + " on " + request.pattern + " at M = " +
                     std::to_string(request.cache_words) + ": counted " + std::to_string(ledger.reads()) +
                     " reads, " + std::to_string(ledger.writes()) + " writes; predicted " +
                     std::to_string(plan.reads) + " reads, " + std::to_string(plan.writes) +
                     " writes (a schedule and its prediction disagree; please report)");
}

void run_counted(Row& row, const Problem& problem, const Mask& mask, const RowRequest& request,
                 const Reference* reference) {
  const bool forward = request.passes != PassSet::backward;
  const bool backward = request.passes != PassSet::forward;
  const int64_t d = problem.head_dim();
  // Plan first, timed on its own: the API calls below plan again, but then the mask structures for
  // these tile sizes are cached, so their times are mostly the schedules'. An M the requested
  // algorithm cannot fit in stops here.
  const bounds::DenseShape shape{problem.seqlen(), problem.seqlen(), d, d};
  auto start = std::chrono::steady_clock::now();
  for (Pass pass : {Pass::forward, Pass::backward}) {
    if (pass == Pass::forward ? forward : backward) plan_for_words(shape, mask, request.cache_words, request.line_words, pass, request.requested);
  }
  row.plan_ms = elapsed_ms(start);
  Outputs out(problem);
  AttentionOptions options;
  options.algorithm = request.requested;
  options.cache_words = request.cache_words;
  options.objective = PlanObjective::words;  // the I/O study: the fewest words, as planned above
  options.line_words = request.line_words;
  io::Ledger forward_ledger(request.line_words), backward_ledger(request.line_words);
  options.ledger = forward ? &forward_ledger : nullptr;  // a backward-only row runs the forward natively
  start = std::chrono::steady_clock::now();
  const Plan forward_plan = attention_forward(problem.q(), problem.k(), problem.v(), out.matrix(out.o, d),
                                              out.matrix(out.lse, 1), mask, options);
  if (forward) {
    row.forward_ms = elapsed_ms(start);
    check_counts(forward_ledger, forward_plan, request, Pass::forward);
    add_pass(row, forward_plan, Pass::forward, true);
    row.reads += forward_ledger.reads();
    row.writes += forward_ledger.writes();
    row.read_lines = forward_ledger.total_lines().reads;
    row.write_lines = forward_ledger.total_lines().writes;
    row.peak_resident = forward_ledger.peak_resident();
  }
  if (backward) {
    options.ledger = &backward_ledger;
    start = std::chrono::steady_clock::now();
    const Plan backward_plan = attention_backward(
        problem.q(), problem.k(), problem.v(), TensorView<const float>(out.matrix(out.o, d)),
        TensorView<const float>(out.matrix(out.lse, 1)), problem.d_o(), out.matrix(out.dq, d), out.matrix(out.dk, d),
        out.matrix(out.dv, d), mask, options);
    row.backward_ms = elapsed_ms(start);
    check_counts(backward_ledger, backward_plan, request, Pass::backward);
    add_pass(row, backward_plan, Pass::backward, !forward);
    row.reads += backward_ledger.reads();
    row.writes += backward_ledger.writes();
    row.read_lines = row.read_lines.value_or(0) + backward_ledger.total_lines().reads;
    row.write_lines = row.write_lines.value_or(0) + backward_ledger.total_lines().writes;
    row.peak_resident = std::max(row.peak_resident.value_or(0), backward_ledger.peak_resident());
  }
  if (reference == nullptr) return;
  const int64_t terms = d + problem.seqlen();
  if (forward && reference->forward) {
    add_comparison(row, compare(out.o, reference->forward->o, terms));
    add_comparison(row, compare(out.lse, reference->forward->lse, terms));
  }
  if (backward && reference->backward) {
    add_comparison(row, compare(out.dq, reference->backward->dq, terms));
    add_comparison(row, compare(out.dk, reference->backward->dk, terms));
    add_comparison(row, compare(out.dv, reference->backward->dv, terms));
  }
}

}  // namespace

const char* pass_set_name(PassSet passes) {
  switch (passes) {
    case PassSet::forward: return "fwd";
    case PassSet::backward: return "bwd";
    case PassSet::both: return "both";
  }
  return "?";
}

PassSet parse_pass_set(const std::string& name) {
  if (name == "fwd") return PassSet::forward;
  if (name == "bwd") return PassSet::backward;
  if (name == "both") return PassSet::both;
  throw UsageError("--pass: '" + name + "' is not one of fwd, bwd, both");
}

Problem::Problem(int64_t seqlen, int64_t head_dim, uint64_t seed, bool with_data)
    : seqlen_(seqlen), head_dim_(head_dim) {
  if (!with_data) return;
  const auto count = static_cast<size_t>(seqlen * head_dim);
  q_ = random_values(count, seed);
  k_ = random_values(count, seed + 1);
  v_ = random_values(count, seed + 2);
  d_o_ = random_values(count, seed + 3);
  q64_.assign(q_.begin(), q_.end());
  k64_.assign(k_.begin(), k_.end());
  v64_.assign(v_.begin(), v_.end());
  d_o64_.assign(d_o_.begin(), d_o_.end());
}

void check_problem_size(int64_t seqlen, int64_t head_dim) {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  if (seqlen > kMaxElements / std::max<int64_t>(head_dim, 1) || seqlen > (int64_t{1} << 32)) {
    throw UsageError("--n, --d: n = " + std::to_string(seqlen) + " with d = " + std::to_string(head_dim) +
                     " is too large (n <= 2^32 and n d <= 2^40)");
  }
}

Reference compute_reference(const Problem& problem, const Mask& mask, bool forward, bool backward) {
  const double scale = problem.head_dim() > 0 ? 1.0 / std::sqrt(static_cast<double>(problem.head_dim())) : 1.0;
  const reference::MaskList<int64_t> masks{mask.csr()};
  Reference result;
  if (forward) result.forward = reference::forward<int64_t>(problem.q64(), problem.k64(), problem.v64(), masks, scale);
  if (backward) {
    result.backward = reference::backward<int64_t>(problem.q64(), problem.k64(), problem.v64(), problem.d_o64(),
                                                   masks, scale);
  }
  return result;
}

void describe_mask(Row& row, const Problem& problem, const Mask& mask) {
  row.seqlen = problem.seqlen();
  row.head_dim = problem.head_dim();
  row.density = mask.density();
  row.z_qk = mask.nnz();
  row.z_input = static_cast<double>(problem.seqlen()) * static_cast<double>(problem.head_dim());
  row.masked = !mask.is_full();
}

Row measure_row(const Problem& problem, const Mask& mask, const RowRequest& request, const Reference* reference) {
  Row row;
  row.pattern = request.pattern;
  describe_mask(row, problem, mask);
  row.cache_words = request.cache_words;
  row.line_words = request.line_words;
  row.pass = pass_set_name(request.passes);
  row.requested = algorithm_name(request.requested);
  try {
    if (request.predict_only) {
      row.source = "predicted";
      const bounds::DenseShape shape{problem.seqlen(), problem.seqlen(), problem.head_dim(), problem.head_dim()};
      bool first = true;
      for (Pass pass : {Pass::forward, Pass::backward}) {
        if ((pass == Pass::forward) ? request.passes == PassSet::backward : request.passes == PassSet::forward) continue;
        const Plan plan = plan_for_words(shape, mask, request.cache_words, request.line_words, pass, request.requested);
        add_pass(row, plan, pass, first);
        first = false;
      }
      row.reads = row.predicted_reads;
      row.writes = row.predicted_writes;
      row.read_lines = row.predicted_read_lines;
      row.write_lines = row.predicted_write_lines;
    } else {
      row.source = "counted";
      run_counted(row, problem, mask, request, reference);
    }
  } catch (const sparse_formats::FormatError& error) {
    // The planner refuses an M that the requested algorithm (or both) cannot fit in: that is a
    // property of this row, not a failure of the sweep. Anything else is a real error.
    const std::string message = error.what();
    const bool infeasible_m = message.find("needs M >=") != std::string::npos ||
                              message.find("fits neither") != std::string::npos;
    if (message.rfind("plan: ", 0) != 0 || !infeasible_m) throw;
    Row infeasible;
    infeasible.pattern = row.pattern;
    describe_mask(infeasible, problem, mask);
    infeasible.cache_words = row.cache_words;
    infeasible.line_words = row.line_words;
    infeasible.pass = row.pass;
    infeasible.requested = row.requested;
    infeasible.source = "infeasible";
    infeasible.note = message.substr(6);
    return infeasible;
  }
  const double total = static_cast<double>(row.total());
  row.ratio_to_bound = row.bound > 0.0 ? total / row.bound : 0.0;
  if (row.flash_io && *row.flash_io > 0) row.ratio_to_flash = total / static_cast<double>(*row.flash_io);
  return row;
}

std::vector<int64_t> add_switch(std::vector<Row>& rows, size_t first, const Problem& problem, const Mask& mask,
                                int64_t anchor, int64_t line_words) {
  const bounds::DenseShape shape{problem.seqlen(), problem.seqlen(), problem.head_dim(), problem.head_dim()};
  const auto begin = rows.begin() + static_cast<std::ptrdiff_t>(first);
  std::vector<int64_t> backward;
  for (Pass pass : {Pass::forward, Pass::backward}) {
    const bool forward = pass == Pass::forward;
    auto includes = [forward](const Row& row) {
      return row.feasible() && !(forward ? row.algorithm_forward : row.algorithm_backward).empty();
    };
    if (std::none_of(begin, rows.end(), includes)) continue;
    const Plan plan = plan_for_words(shape, mask, anchor, line_words, pass, Algorithm::automatic, SwitchSearch::search);
    const int64_t found = plan.switch_cache_words;
    if (!forward) backward = plan.switches;
    for (auto row = begin; row != rows.end(); ++row) {
      if (!includes(*row)) continue;
      (forward ? row->switch_forward : row->switch_backward) = found > 0 ? std::optional<int64_t>(found) : std::nullopt;
      (forward ? row->switches_forward : row->switches_backward) = plan.switches;
    }
  }
  return backward;
}

}  // namespace spattn::cli
