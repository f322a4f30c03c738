// Runs a small counted sliding-window attention forward through the installed spattn package and checks the
// ledger against the plan: prints "consumer: ok" and exits 0 when they agree.
#include <spattn/attention.hpp>

#include <cstdio>
#include <vector>

int main() {
  const int64_t n = 64, d = 16;
  std::vector<float> q(n * d, 0.5f), k(n * d, 0.25f), v(n * d, 1.0f), o(n * d), lse(n);
  spattn::AttentionOptions options;
  options.cache_words = 2048;
  spattn::io::Ledger ledger;
  options.ledger = &ledger;
  using spattn::TensorView;
  const auto mask = spattn::Mask::from_spec("sliding_window:w=8", n, n);
  const spattn::Plan plan = spattn::attention_forward(
      TensorView<const float>::matrix(q.data(), n, d), TensorView<const float>::matrix(k.data(), n, d),
      TensorView<const float>::matrix(v.data(), n, d), TensorView<float>::matrix(o.data(), n, d),
      TensorView<float>::matrix(lse.data(), n, 1), mask, options);
  const bool ok = ledger.reads() == plan.reads && ledger.writes() == plan.writes && o[0] == 1.0f;
  std::printf("consumer: %s (%s, %lld words moved)\n", ok ? "ok" : "MISMATCH",
              spattn::algorithm_name(plan.algorithm), static_cast<long long>(plan.total()));
  return ok ? 0 : 1;
}
