// spattn plan / spattn bound: the planner's choice and the lower bounds.
//   spattn plan --n 1024 --d 64 --cache-words 4096 [--pass both] [--algorithm auto] [--mask SPEC]
//   spattn bound --n 1024 --d 64 --cache-words 4096
// With sparse inputs (--q / --k / --v FILE.mtx, each optional; one head) the shapes come from the
// files, the plan predicts each algorithm exactly for those CSR inputs, and both commands use
// Z_input = (nnz(Q) + nnz(K)) / 2.
//   spattn plan --device cuda [--dtype bf16] [--shared-memory-bytes 232448] --n 16384 --d 128 ...
// prints what the CUDA backend would run (spattn::cuda::plan_call): its kernels, tiles and the M
// its shared memory holds; without --shared-memory-bytes the current GPU's budget (one must exist).
#include "cli_support.hpp"
#include "commands.hpp"

#include <spattn/bounds.hpp>
#include <spattn/cuda.hpp>
#include <spattn/io.hpp>
#include <spattn/plan.hpp>
#include <spattn/sparse_inputs.hpp>

#include <array>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <vector>

namespace spattn::cli {

namespace {

struct ShapeFlags {
  int64_t seqlen_q = 1024;
  int64_t seqlen_k = 0;  // 0: same as seqlen_q
  int64_t head_dim = 64;
  int64_t head_dim_v = 0;  // 0: same as head_dim
  int64_t cache_words = 4096;
  int64_t line_words = io::kDefaultLineWords;
  int64_t heads = 1;
  std::string pass = "both";
  std::string algorithm = "auto";
  std::string mask = "full";
  bool search_switch = false;
  std::array<std::string, 3> inputs;  // --q, --k, --v: sparse inputs (.mtx), each optional
  std::string objective = "words";
  std::string device = "cpu";
  std::string dtype = "fp32";
  int64_t shared_memory_bytes = 0;  // --device cuda: 0 = the current GPU's

  bounds::DenseShape shape() const {
    return {seqlen_q, seqlen_k > 0 ? seqlen_k : seqlen_q, head_dim,
            head_dim_v > 0 ? head_dim_v : head_dim};
  }
};

void add_mask_flag(CLI::App* cmd, ShapeFlags& flags) {
  cmd->add_option("--mask", flags.mask, "A PATTERN-SPEC or a .mtx file")->capture_default_str();
}

void add_shape_flags(CLI::App* cmd, ShapeFlags& flags) {
  cmd->add_option("--n,--seqlen-q", flags.seqlen_q, "Query sequence length")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--seqlen-k", flags.seqlen_k, "Key sequence length (0: same as --n)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--d,--head-dim", flags.head_dim, "Head dimension of Q and K")
      ->check(at_least(1))->capture_default_str();
  cmd->add_option("--head-dim-v", flags.head_dim_v, "Head dimension of V (0: same as --d)")
      ->check(at_least(0))->capture_default_str();
  cmd->add_option("--cache-words,-M", flags.cache_words, "Fast-memory size M in words")
      ->check(at_least(1))->capture_default_str();
  add_line_words_flag(cmd, flags.line_words);
}

// The bounds in lines of L words: a line carries at most L words, so any schedule moving W words
// moves at least W / L lines. The line model's domain is the tall cache, M >= 2 L^2 (the
// external-memory model's assumption; docs/io_model.md).
void print_line_bounds(const ShapeFlags& flags, double bound, double compulsory) {
  const auto per_line = static_cast<double>(flags.line_words);
  const int64_t tall = 2 * flags.line_words * flags.line_words;
  std::printf("  in lines of L = %lld words: bound %.6g lines", static_cast<long long>(flags.line_words), bound / per_line);
  if (compulsory > 0.0) std::printf(", compulsory %.6g lines", compulsory / per_line);
  std::printf("; tall cache M >= 2 L^2 = %lld: %s\n", static_cast<long long>(tall),
              flags.cache_words >= tall ? "yes" : "no, M is below the line model's domain");
}

void add_input_flags(CLI::App* cmd, ShapeFlags& flags) {
  cmd->add_option("--q", flags.inputs[0], "Sparse queries (seqlen_q x head_dim .mtx); sets --n and --d");
  cmd->add_option("--k", flags.inputs[1], "Sparse keys (seqlen_k x head_dim .mtx); sets --seqlen-k and --d");
  cmd->add_option("--v", flags.inputs[2], "Sparse values (seqlen_k x head_dim_v .mtx); sets --seqlen-k and --head-dim-v");
}

// The one-head inputs named by --q / --k / --v: those given as CSR from their files, the others
// dense (zeros: only their shapes matter to a plan or a bound) of the shape the files and flags
// imply; none at all when no file is given. A shape flag given explicitly must agree with the files.
class PlanInputs {
 public:
  PlanInputs(const ShapeFlags& flags, const CLI::App& cmd) {
    const char* names[3] = {"--q", "--k", "--v"};
    for (int i = 0; i < 3; ++i) {
      if (flags.inputs[static_cast<size_t>(i)].empty()) continue;
      if (!is_matrix_market(flags.inputs[static_cast<size_t>(i)])) {
        throw UsageError(std::string(names[i]) + ": '" + flags.inputs[static_cast<size_t>(i)] + "' is not a .mtx file");
      }
      csr_[static_cast<size_t>(i)] = load_csr_input(flags.inputs[static_cast<size_t>(i)], names[i]);
    }
    const auto rows = [&](int i) { return csr_[static_cast<size_t>(i)]->num_rows(); };
    const auto cols = [&](int i) { return csr_[static_cast<size_t>(i)]->num_cols(); };
    shape_ = flags.shape();
    if (given(0)) shape_.seqlen_q = pick(cmd, "--n", flags.seqlen_q, rows(0), "--q");
    if (given(0) || given(1)) shape_.head_dim = pick(cmd, "--d", flags.head_dim, given(0) ? cols(0) : cols(1), given(0) ? "--q" : "--k");
    if (given(1) || given(2)) {
      shape_.seqlen_k = pick(cmd, "--seqlen-k", flags.seqlen_k, given(1) ? rows(1) : rows(2), given(1) ? "--k" : "--v");
    } else if (given(0) && cmd.count("--seqlen-k") == 0) {
      shape_.seqlen_k = shape_.seqlen_q;
    }
    // Only K or V given: a square problem unless --n says otherwise.
    if (!given(0) && (given(1) || given(2)) && cmd.count("--n") == 0) shape_.seqlen_q = shape_.seqlen_k;
    shape_.head_dim_v = given(2) ? pick(cmd, "--head-dim-v", flags.head_dim_v, cols(2), "--v")
                                 : (cmd.count("--head-dim-v") > 0 && flags.head_dim_v > 0 ? flags.head_dim_v : shape_.head_dim);
    if (!any()) return;  // a dense plan needs the shape only: no n x d arrays (--n 10000000 stays cheap)
    const int64_t extents[3][2] = {{shape_.seqlen_q, shape_.head_dim}, {shape_.seqlen_k, shape_.head_dim},
                                   {shape_.seqlen_k, shape_.head_dim_v}};
    AttentionInput* slots[3] = {&inputs_.q, &inputs_.k, &inputs_.v};
    for (size_t i = 0; i < 3; ++i) {
      if (csr_[i]) {
        *slots[i] = AttentionInput::csr(csr_[i]->view());
      } else {
        dense_[i].assign(static_cast<size_t>(extents[i][0] * extents[i][1]), 0.0f);
        *slots[i] = AttentionInput::dense(TensorView<const float>::matrix(dense_[i].data(), extents[i][0], extents[i][1]));
      }
    }
  }
  PlanInputs(const PlanInputs&) = delete;
  PlanInputs& operator=(const PlanInputs&) = delete;

  bool any() const { return given(0) || given(1) || given(2); }
  const bounds::DenseShape& shape() const { return shape_; }
  const AttentionInputs& inputs() const { return inputs_; }

 private:
  bool given(int i) const { return csr_[static_cast<size_t>(i)].has_value(); }
  // The extent a file sets; an explicit flag must say the same.
  static int64_t pick(const CLI::App& cmd, const char* flag, int64_t flag_value, int64_t file_value,
                      const char* file_flag) {
    if (cmd.count(flag) > 0 && flag_value != file_value) {
      throw UsageError(std::string(flag) + " = " + std::to_string(flag_value) + " disagrees with " + file_flag +
                       ", whose file gives " + std::to_string(file_value));
    }
    return file_value;
  }

  std::array<std::optional<sparse_formats::CsrMatrix<int64_t, float>>, 3> csr_;
  std::array<std::vector<float>, 3> dense_;
  bounds::DenseShape shape_;
  AttentionInputs inputs_;
};

std::vector<Pass> passes(const std::string& pass) {
  if (pass == "fwd") return {Pass::forward};
  if (pass == "bwd") return {Pass::backward};
  return {Pass::forward, Pass::backward};
}

// z_input: the inputs' (nnz(Q) + nnz(K)) / 2 (for dense inputs (seqlen_q + seqlen_k) d / 2).
void print_sparse_bound(const ShapeFlags& flags, const bounds::DenseShape& shape, const Mask& mask,
                        double z_input) {
  const auto m = static_cast<double>(flags.cache_words);
  const auto z_qk = static_cast<double>(mask.nnz());
  const auto b = bounds::sparse(z_input, z_qk, m);
  std::printf("sparse bound (forward and backward; a worst case over masks of this Z_QK) for mask %s,\n"
              "seqlen_q %lld, seqlen_k %lld, head_dim %lld, M %lld words:\n"
              "  Z_QK (attended pairs): %.0f (density %.4g)\n"
              "  Z_input = (nnz(Q) + nnz(K)) / 2: %.10g\n"
              "  large-cache branch Z_input^2 / M: %.6g words\n"
              "  small-cache branch Z_input sqrt(Z_QK) / sqrt(M): %.6g words\n"
              "  bound (the minimum, %s): %.6g words\n"
              "  branches cross at M = Z_input^2 / Z_QK = %.0f words\n",
              flags.mask.c_str(), static_cast<long long>(shape.seqlen_q), static_cast<long long>(shape.seqlen_k),
              static_cast<long long>(shape.head_dim), static_cast<long long>(flags.cache_words), z_qk,
              mask.density(), z_input, b.large_cache, b.small_cache, bounds::branch_name(b.branch), b.value,
              b.crossover_m);
  print_line_bounds(flags, b.value, 0.0);
}

void print_bound(const ShapeFlags& flags) {
  const auto shape = flags.shape();
  const auto m = static_cast<double>(flags.cache_words);
  std::printf("bounds for seqlen_q %lld, seqlen_k %lld, head_dim %lld, head_dim_v %lld, M %lld words\n",
              static_cast<long long>(shape.seqlen_q), static_cast<long long>(shape.seqlen_k),
              static_cast<long long>(shape.head_dim), static_cast<long long>(shape.head_dim_v),
              static_cast<long long>(flags.cache_words));
  for (Pass pass : passes(flags.pass)) {
    const bool forward = pass == Pass::forward;
    const auto b = forward ? bounds::dense_forward(shape, m) : bounds::dense_backward(shape, m);
    std::printf("%s (%s):\n  large-cache branch %s: %.6g words\n  small-cache branch %s: %.6g words\n"
                "  bound (the minimum, %s): %.6g words\n  compulsory I/O: %.6g words\n"
                "  branches cross at M = d^2 = %.0f words; this M is %s\n",
                pass_name(pass), forward ? "Saha and Ye" : "Theorem 1.1",
                forward ? "n^2 d^2 / M" : "(n^2 d^2 + n d^3) / M", b.large_cache,
                forward ? "n^2 d / sqrt(M)" : "(n^2 d + n d^2) / sqrt(M)", b.small_cache,
                bounds::branch_name(b.branch), b.value,
                forward ? bounds::compulsory_forward(shape) : bounds::compulsory_backward(shape),
                b.crossover_m, m >= b.crossover_m ? "large-cache (flash is optimal)" : "small-cache");
    print_line_bounds(flags, b.value, forward ? bounds::compulsory_forward(shape) : bounds::compulsory_backward(shape));
  }
}

// --device cuda: the CUDA backend's plan for each pass.
void print_cuda_plan(const ShapeFlags& flags, const CLI::App& cmd, const bounds::DenseShape& shape, const Mask& mask) {
  if (cmd.count("--cache-words") > 0) {
    throw UsageError("--cache-words: with --device cuda, M comes from the shared memory (--shared-memory-bytes)");
  }
  if (flags.search_switch) throw UsageError("--switch: the CPU planner's search; not with --device cuda");
  if (cmd.count("--line-words") > 0) throw UsageError("--line-words: the CPU planner's line model; not with --device cuda");
  cuda::Options options;
  options.algorithm = flags.algorithm == "small_cache" ? cuda::CudaAlgorithm::small_cache : cuda::CudaAlgorithm::flash;
  options.shared_memory_bytes = flags.shared_memory_bytes;
  const cuda::ElementType type = flags.dtype == "fp16"   ? cuda::ElementType::fp16
                                 : flags.dtype == "bf16" ? cuda::ElementType::bf16
                                                         : cuda::ElementType::fp32;
  std::vector<cuda::DeviceRun> runs;  // planned first: an error prints nothing else
  for (Pass pass : passes(flags.pass)) {
    runs.push_back(cuda::plan_call(pass, type, shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v,
                                   mask, options));
  }
  std::printf("cuda plan: %s, seqlen_q %lld, seqlen_k %lld, head_dim %lld, head_dim_v %lld, mask %s, shared memory %s\n",
              cuda::element_type_name(type), static_cast<long long>(shape.seqlen_q),
              static_cast<long long>(shape.seqlen_k), static_cast<long long>(shape.head_dim),
              static_cast<long long>(shape.head_dim_v), flags.mask.c_str(),
              flags.shared_memory_bytes > 0 ? (std::to_string(flags.shared_memory_bytes) + " bytes").c_str()
                                            : "of the current GPU");
  for (const cuda::DeviceRun& run : runs) std::cout << "  " << run.to_string() << "\n";
}

}  // namespace

void register_plan(CLI::App& app) {
  auto flags = std::make_shared<ShapeFlags>();
  CLI::App* plan = app.add_subcommand("plan", "Predict each algorithm's I/O exactly and choose one");
  add_shape_flags(plan, *flags);
  plan->add_option("--heads", flags->heads, "Head problems (batch x heads)")
      ->check(at_least(1))->capture_default_str();
  plan->add_option("--pass", flags->pass, "fwd, bwd or both")
      ->check(CLI::IsMember({"fwd", "bwd", "both"}))->capture_default_str();
  plan->add_option("--algorithm", flags->algorithm, "auto, flash or small_cache")
      ->check(CLI::IsMember({"auto", "flash", "small_cache"}))->capture_default_str();
  add_mask_flag(plan, *flags);
  add_input_flags(plan, *flags);
  plan->add_flag("--switch", flags->search_switch,
                 "Search the M at which the choice changes (always done for the full mask)");
  plan->add_option("--objective", flags->objective,
                   "What the plan minimizes over a mask: words (the I/O study) or time (the API's default: flash's tiles and auto's choice priced for speed)")
      ->check(CLI::IsMember({"words", "time"}))->capture_default_str();
  plan->add_option("--device", flags->device, "cpu (the planner's words) or cuda (the CUDA backend's kernels and tiles)")
      ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  plan->add_option("--dtype", flags->dtype, "--device cuda: element type")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))->capture_default_str();
  plan->add_option("--shared-memory-bytes", flags->shared_memory_bytes,
                   "--device cuda: shared memory per block (0: the current GPU's)")
      ->check(at_least(0))->capture_default_str();
  plan->callback([flags, plan] {
    if (flags->device != "cuda" && (plan->count("--dtype") > 0 || plan->count("--shared-memory-bytes") > 0)) {
      throw UsageError("--dtype and --shared-memory-bytes describe a CUDA plan: add --device cuda");
    }
    const PlanInputs files(*flags, *plan);
    const auto shape = files.shape();
    const Mask mask = load_prepared_mask(flags->mask, shape.seqlen_q, shape.seqlen_k, "--mask");
    if (flags->device == "cuda") {
      if (files.any()) throw UsageError("--q/--k/--v: sparse inputs are planned on the CPU only (no --device cuda)");
      print_cuda_plan(*flags, *plan, shape, mask);
      return;
    }
    if (files.any()) {
      if (flags->objective != "words") throw UsageError("--objective: sparse inputs are planned for words");
      if (flags->heads != 1) throw UsageError("--heads: sparse inputs (--q/--k/--v) are one head");
      if (flags->search_switch) std::cout << "note: --switch is not searched with sparse inputs\n";
      AttentionOptions options;
      options.cache_words = flags->cache_words;
      options.algorithm = parse_algorithm(flags->algorithm);
      options.line_words = flags->line_words;
      for (Pass pass : passes(flags->pass)) std::cout << plan_attention(files.inputs(), mask, pass, options).to_string();
      return;
    }
    if (!mask.is_full()) std::cout << "mask " << flags->mask << ": " << describe_mask_memory(mask) << '\n';
    HeadPlanOptions planning;
    planning.cache_words = flags->cache_words;
    planning.algorithm = parse_algorithm(flags->algorithm);
    planning.num_heads = flags->heads;
    planning.switch_search = flags->search_switch ? SwitchSearch::search : SwitchSearch::skip;
    planning.objective = parse_plan_objective(flags->objective);
    planning.line_words = flags->line_words;
    for (Pass pass : passes(flags->pass)) std::cout << plan_heads(shape, mask, pass, planning).to_string();
  });

  auto bound_flags = std::make_shared<ShapeFlags>();
  CLI::App* bound = app.add_subcommand("bound", "Print the I/O lower bounds for a dense problem");
  add_shape_flags(bound, *bound_flags);
  bound->add_option("--pass", bound_flags->pass, "fwd, bwd or both")
      ->check(CLI::IsMember({"fwd", "bwd", "both"}))->capture_default_str();
  add_mask_flag(bound, *bound_flags);
  add_input_flags(bound, *bound_flags);
  bound->callback([bound_flags, bound] {
    const PlanInputs files(*bound_flags, *bound);
    const auto shape = files.shape();
    const Mask mask = load_prepared_mask(bound_flags->mask, shape.seqlen_q, shape.seqlen_k, "--mask");
    if (mask.is_full() && !files.any()) {
      print_bound(*bound_flags);
    } else {
      // Dense inputs: Z_input = (seqlen_q + seqlen_k) d / 2.
      const double z_input = files.any() ? files.inputs().z_input()
                                         : 0.5 * (static_cast<double>(shape.seqlen_q) + static_cast<double>(shape.seqlen_k)) *
                                               static_cast<double>(shape.head_dim);
      print_sparse_bound(*bound_flags, shape, mask, z_input);
    }
  });
}

}  // namespace spattn::cli
