#include "speed_cases.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

namespace spattn::bench {

const std::vector<MaskChoice>& standard_masks() {
  static const std::vector<MaskChoice> masks = {
      {"full", "full"},
      {"causal", "causal"},
      {"window", "sliding_window:w=128"},
      {"bigbird", "bigbird"},
      {"documents", "documents:num_docs=8"},
      {"random", "random:p=0.05"},
      {"random_blocks", "random_blocks:p=0.1"},
  };
  return masks;
}

MaskChoice parse_mask_choice(const std::string& text) {
  for (const MaskChoice& choice : standard_masks()) {
    if (choice.name == text) return choice;
  }
  return {text, text};
}

std::vector<std::string> split_mask_list(const std::vector<std::string>& arguments) {
  std::vector<std::string> masks;
  for (const std::string& argument : arguments) {
    size_t begin = 0;
    bool first = true;
    while (begin <= argument.size()) {
      const size_t end = std::min(argument.find(',', begin), argument.size());
      const std::string piece = argument.substr(begin, end - begin);
      const bool parameter = piece.find('=') != std::string::npos && piece.find(':') == std::string::npos;
      if (parameter && !first) {
        masks.back() += "," + piece;
      } else {
        masks.push_back(piece);
      }
      first = false;
      begin = end + 1;
    }
  }
  return masks;
}

int resolved_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

std::vector<float> uniform_values(size_t count, uint64_t seed) {
  std::vector<float> values(count);
  uint64_t state = seed;
  for (float& value : values) {  // splitmix64: the same inputs on every platform
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    value = static_cast<float>(static_cast<double>(z >> 40) / 8388608.0 - 1.0);
  }
  return values;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

SpeedProblem::SpeedProblem(int64_t heads, int64_t seqlen, int64_t head_dim, uint64_t seed)
    : heads_(heads), seqlen_(seqlen), head_dim_(head_dim) {
  const auto size = static_cast<size_t>(heads * seqlen * head_dim);
  q_ = uniform_values(size, seed);
  k_ = uniform_values(size, seed + 1);
  v_ = uniform_values(size, seed + 2);
  d_o_ = uniform_values(size, seed + 3);
  o_.assign(size, 0.0f);
  dq_.assign(size, 0.0f);
  dk_.assign(size, 0.0f);
  dv_.assign(size, 0.0f);
  lse_.assign(static_cast<size_t>(heads * seqlen), 0.0f);
}

TensorView<const float> SpeedProblem::in(const std::vector<float>& x) const {
  const int64_t last = static_cast<int64_t>(x.size()) / (heads_ * std::max<int64_t>(seqlen_, 1));
  return TensorView<const float>::contiguous(x.data(), 1, heads_, seqlen_, last);
}

TensorView<float> SpeedProblem::out(std::vector<float>& x, int64_t last) {
  return TensorView<float>::contiguous(x.data(), 1, heads_, seqlen_, last);
}

Plan SpeedProblem::forward(const Mask& mask, const AttentionOptions& options) {
  return attention_forward(in(q_), in(k_), in(v_), out(o_, head_dim_), out(lse_, 1), mask, options);
}

Plan SpeedProblem::backward(const Mask& mask, const AttentionOptions& options) {
  return attention_backward(in(q_), in(k_), in(v_), in(o_), in(lse_), in(d_o_), out(dq_, head_dim_),
                            out(dk_, head_dim_), out(dv_, head_dim_), mask, options);
}

double CaseResult::forward_gflops() const {
  return 4.0 * static_cast<double>(nnz) * static_cast<double>(head_dim * heads) / forward_s * 1e-9;
}
double CaseResult::backward_gflops() const {
  return 10.0 * static_cast<double>(nnz) * static_cast<double>(head_dim * heads) / backward_s * 1e-9;
}
double CaseResult::both_gflops() const {
  return 14.0 * static_cast<double>(nnz) * static_cast<double>(head_dim * heads) / both_s * 1e-9;
}

std::vector<CaseResult> run_case(SpeedProblem& problem, const std::vector<CaseSlot>& slots,
                                 const RunSettings& settings) {
  const size_t count = slots.size();
  std::vector<AttentionOptions> options(count);
  std::vector<CaseResult> results(count);
  for (size_t i = 0; i < count; ++i) {
    options[i].algorithm = slots[i].algorithm;
    options[i].cache_words = slots[i].cache_words;
    options[i].line_words = settings.line_words;
    options[i].threads = settings.threads;
    const Mask& mask = slots[i].mask;
    CaseResult& result = results[i];
    result.mask = slots[i].choice.name;
    result.seqlen = problem.seqlen();
    result.head_dim = problem.head_dim();
    result.heads = settings.heads;
    result.threads = resolved_threads(settings.threads);
    result.cache_words = slots[i].cache_words == 0 ? default_cache_words() : slots[i].cache_words;
    result.nnz = mask.nnz();
    result.density = mask.density();
    result.requested = slots[i].algorithm;
    // Warm-up: builds the mask's cached schedule structures and pages the buffers in.
    result.forward_ran = problem.forward(mask, options[i]).algorithm;
    result.backward_ran = problem.backward(mask, options[i]).algorithm;
  }

  std::vector<std::vector<double>> forward(count), backward(count), both(count);
  const auto case_start = std::chrono::steady_clock::now();
  // Seconds per slot, so the case's budget and minimum scale with its slots.
  const double budget = settings.max_seconds * static_cast<double>(count);
  const double minimum = settings.min_seconds * static_cast<double>(count);
  for (int r = 0; r < kMaxRepetitions; ++r) {
    // Repetition r starts at slot r mod count, so that no slot always runs first or right after
    // another (a slot that frees n x n buffers, say).
    for (size_t turn = 0; turn < count; ++turn) {
      const size_t i = (turn + static_cast<size_t>(r)) % count;
      const auto start = std::chrono::steady_clock::now();
      problem.forward(slots[i].mask, options[i]);
      const double forward_s = seconds_since(start);
      problem.backward(slots[i].mask, options[i]);
      const double both_s = seconds_since(start);
      forward[i].push_back(forward_s);
      backward[i].push_back(both_s - forward_s);
      both[i].push_back(both_s);
    }
    const double elapsed = seconds_since(case_start);
    if (elapsed > budget || (r + 1 >= std::max(settings.repetitions, 1) && elapsed >= minimum)) break;
  }
  // The planner's share: what the API spends choosing before it runs (measured apart).
  const bounds::DenseShape shape{problem.seqlen(), problem.seqlen(), problem.head_dim(), problem.head_dim()};
  for (size_t i = 0; i < count; ++i) {
    CaseResult& result = results[i];
    HeadPlanOptions planning;  // as the runs planned: their options' objective
    planning.cache_words = result.cache_words;
    planning.algorithm = result.requested;
    planning.num_heads = settings.heads;
    planning.objective = options[i].objective;
    planning.line_words = settings.line_words;
    std::vector<double> plans;
    for (int r = 0; r < 3; ++r) {
      const auto start = std::chrono::steady_clock::now();
      // (the mask's caches are warm by now)
      plan_heads(shape, slots[i].mask, Pass::forward, planning);
      plan_heads(shape, slots[i].mask, Pass::backward, planning);
      plans.push_back(seconds_since(start));
    }
    result.repetitions = static_cast<int>(both[i].size());
    result.plan_s = median(plans);
    result.forward_s = median(forward[i]);
    result.backward_s = median(backward[i]);
    result.both_s = median(both[i]);
    result.forward_runs_s = forward[i];
    result.backward_runs_s = backward[i];
    result.both_runs_s = both[i];
  }
  return results;
}

}  // namespace spattn::bench
