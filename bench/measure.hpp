// Measuring one row of spattn run / spattn sweep: plan each pass, run it counted through the public
// API (spattn::attention_forward / attention_backward with a ledger), check that the counted reads
// and writes equal the plan's exactly, and compare the outputs with the fp64 reference.
#pragma once

#include "report.hpp"

#include <spattn/io.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>
#include <spattn/reference.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spattn::cli {

enum class PassSet { forward, backward, both };
const char* pass_set_name(PassSet passes);  // "fwd", "bwd", "both"
PassSet parse_pass_set(const std::string& name);  // one of those three names

// Deterministic inputs of one head problem in [-1, 1) (splitmix64, the same on every platform):
// Q, K, V, dO of shape (n, d), as float for the schedules and as double for the reference. Without
// `with_data` it holds only the shape (enough for predictions: n may then be far too large to run).
class Problem {
 public:
  Problem(int64_t seqlen, int64_t head_dim, uint64_t seed, bool with_data = true);
  int64_t seqlen() const { return seqlen_; }
  int64_t head_dim() const { return head_dim_; }
  TensorView<const float> q() const { return view(q_); }
  TensorView<const float> k() const { return view(k_); }
  TensorView<const float> v() const { return view(v_); }
  TensorView<const float> d_o() const { return view(d_o_); }
  // The same values widened to double, for the reference.
  TensorView<const double> q64() const { return view(q64_); }
  TensorView<const double> k64() const { return view(k64_); }
  TensorView<const double> v64() const { return view(v64_); }
  TensorView<const double> d_o64() const { return view(d_o64_); }

 private:
  template <typename T>
  TensorView<const T> view(const std::vector<T>& x) const {
    return TensorView<const T>::matrix(x.data(), seqlen_, head_dim_);
  }
  int64_t seqlen_, head_dim_;
  std::vector<float> q_, k_, v_, d_o_;
  std::vector<double> q64_, k64_, v64_, d_o64_;
};

// Refuses sizes whose n x d does not fit the index arithmetic (UsageError naming --n and --d).
void check_problem_size(int64_t seqlen, int64_t head_dim);

// The fp64 reference of one (problem, mask), computed once and reused for every cache size and
// algorithm.
struct Reference {
  std::optional<reference::ForwardResult> forward;
  std::optional<reference::BackwardResult> backward;
};
Reference compute_reference(const Problem& problem, const Mask& mask, bool forward, bool backward);

struct RowRequest {
  std::string pattern;  // as given on the command line (for the row)
  int64_t cache_words = 0;
  int64_t line_words = io::kDefaultLineWords;  // L of the plan and the counts (1: the word model)
  Algorithm requested = Algorithm::automatic;
  PassSet passes = PassSet::both;
  bool predict_only = false;  // fill the row from the plan without running
};

// One row. Counted rows throw RuntimeError when the counted reads or writes differ from the plan's
// (a schedule and its prediction disagree). A requested algorithm that does not fit in M gives an
// "infeasible" row whose note says why. `reference` may be null (not validated).
Row measure_row(const Problem& problem, const Mask& mask, const RowRequest& request,
                const Reference* reference);

// Fills the mask statistics of a row (density, Z_QK, Z_input) without planning.
void describe_mask(Row& row, const Problem& problem, const Mask& mask);

// The planner's switch M (where automatic selection changes algorithm, nearest to `anchor`) and
// every M where it switches, for each pass, written into rows[first...] (the rows of one mask, n
// and d) that include the pass. A full mask's rows already carry them (the planner always searches
// there); for a masked problem it re-predicts at about 40 sizes, so it is done once per (mask, n,
// d), not per row. Returns every backward switch, ascending (empty: none).
std::vector<int64_t> add_switch(std::vector<Row>& rows, size_t first, const Problem& problem, const Mask& mask,
                                int64_t anchor, int64_t line_words = io::kDefaultLineWords);

}  // namespace spattn::cli
