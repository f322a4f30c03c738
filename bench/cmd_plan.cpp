// spattn plan / spattn bound: the planner's choice and the lower bounds for a dense problem.
//   spattn plan --n 1024 --d 64 --cache-words 4096 [--pass both] [--algorithm auto]
//   spattn bound --n 1024 --d 64 --cache-words 4096
#include "cli_support.hpp"
#include "commands.hpp"

#include <spattn/bounds.hpp>
#include <spattn/plan.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

namespace spattn::cli {

namespace {

struct ShapeFlags {
  int64_t seqlen_q = 1024;
  int64_t seqlen_k = 0;  // 0: same as seqlen_q
  int64_t head_dim = 64;
  int64_t head_dim_v = 0;  // 0: same as head_dim
  int64_t cache_words = 4096;
  int64_t heads = 1;
  std::string pass = "both";
  std::string algorithm = "auto";
  std::string mask = "full";
  bool search_switch = false;

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
}

std::vector<Pass> passes(const std::string& pass) {
  if (pass == "fwd") return {Pass::forward};
  if (pass == "bwd") return {Pass::backward};
  return {Pass::forward, Pass::backward};
}

void print_sparse_bound(const ShapeFlags& flags, const Mask& mask) {
  const auto shape = flags.shape();
  const auto m = static_cast<double>(flags.cache_words);
  const double z_input = 0.5 * static_cast<double>(shape.seqlen_q + shape.seqlen_k) * static_cast<double>(shape.head_dim);
  const auto z_qk = static_cast<double>(mask.nnz());
  const auto b = bounds::sparse(z_input, z_qk, m);
  std::printf("sparse bound (forward and backward; a worst case over masks of this Z_QK) for mask %s,\n"
              "seqlen_q %lld, seqlen_k %lld, head_dim %lld, M %lld words:\n"
              "  Z_QK (attended pairs): %.0f (density %.4g)\n"
              "  Z_input = (nnz(Q) + nnz(K)) / 2: %.0f\n"
              "  large-cache branch Z_input^2 / M: %.6g words\n"
              "  small-cache branch Z_input sqrt(Z_QK) / sqrt(M): %.6g words\n"
              "  bound (the minimum, %s): %.6g words\n"
              "  branches cross at M = Z_input^2 / Z_QK = %.0f words\n",
              flags.mask.c_str(), static_cast<long long>(shape.seqlen_q), static_cast<long long>(shape.seqlen_k),
              static_cast<long long>(shape.head_dim), static_cast<long long>(flags.cache_words), z_qk,
              mask.density(), z_input, b.large_cache, b.small_cache, bounds::branch_name(b.branch), b.value,
              b.crossover_m);
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
  }
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
  plan->add_flag("--switch", flags->search_switch,
                 "Search the M at which the choice changes (always done for the full mask)");
  plan->callback([flags] {
    const auto shape = flags->shape();
    const Mask mask = load_prepared_mask(flags->mask, shape.seqlen_q, shape.seqlen_k, "--mask");
    for (Pass pass : passes(flags->pass)) {
      std::cout << plan_attention(shape, mask, flags->cache_words, pass,
                                  parse_algorithm(flags->algorithm), flags->heads, flags->search_switch)
                       .to_string();
    }
  });

  auto bound_flags = std::make_shared<ShapeFlags>();
  CLI::App* bound = app.add_subcommand("bound", "Print the I/O lower bounds for a dense problem");
  add_shape_flags(bound, *bound_flags);
  bound->add_option("--pass", bound_flags->pass, "fwd, bwd or both")
      ->check(CLI::IsMember({"fwd", "bwd", "both"}))->capture_default_str();
  add_mask_flag(bound, *bound_flags);
  bound->callback([bound_flags] {
    const auto shape = bound_flags->shape();
    const Mask mask = load_prepared_mask(bound_flags->mask, shape.seqlen_q, shape.seqlen_k, "--mask");
    if (mask.is_full()) {
      print_bound(*bound_flags);
    } else {
      print_sparse_bound(*bound_flags, mask);
    }
  });
}

}  // namespace spattn::cli
