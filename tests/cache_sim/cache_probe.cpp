// One native attention call for a cache simulator to watch (cache_sim_check.py): the inputs and,
// for the backward, the forward's outputs are made first, uninstrumented; then exactly one call of
// the requested pass runs between CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION,
// on one thread (a thread of its own, below), so that callgrind (--instr-atstart=no
// --cache-sim=yes) sees that call's memory traffic alone (the plan and the mask's prepared
// structures are built before, as they are once per mask in use). Before it, the same call runs
// counted (uninstrumented): the probe prints the words and lines of 16 words that run read and
// wrote, for the script to hold the simulated misses against, and the lines the API's
// finite-value check reads before the schedule runs (every input once: q, k, v; backward also o,
// lse, d_o), which the ledger does not book (it counts the schedule's moves).
//
//   cache_probe N D M ALGORITHM PASS MASK [OBJECTIVE]   e.g. cache_probe 512 64 1024 flash bwd causal
//
// OBJECTIVE is words (the I/O study's, the default) or time (the API's: flash's float32 backward
// then runs as one loop, dQ in the dK/dV pass, where it prices lower).
#include <spattn/attention.hpp>
#include <spattn/io.hpp>
#include <spattn/plan.hpp>

#include <valgrind/callgrind.h>

#include "support/test_helpers.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>


namespace {

// A float array starting on a 64-byte line, as the line model takes every array to (and as
// torch's CPU allocator gives); a plain std::vector of this size starts 16 bytes into a line.
class LineArray {
 public:
  explicit LineArray(const std::vector<float>& values) : storage_(values.size() + 16) {
    const auto address = reinterpret_cast<std::uintptr_t>(storage_.data());
    data_ = storage_.data() + (64 - address % 64) % 64 / sizeof(float);
    std::copy(values.begin(), values.end(), data_);
  }
  float* data() { return data_; }

 private:
  std::vector<float> storage_;
  float* data_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: cache_probe N D M ALGORITHM fwd|bwd MASK [words|time]\n");
    return 2;
  }
  try {
    const int64_t n = std::stoll(argv[1]), d = std::stoll(argv[2]), m = std::stoll(argv[3]);
    const std::string pass = argv[5];
    if (pass != "fwd" && pass != "bwd") throw std::invalid_argument("PASS must be fwd or bwd, got '" + pass + "'");
    const spattn::Mask mask = spattn::Mask::from_spec(argv[6], n, n);
    spattn::AttentionOptions options;
    options.algorithm = spattn::parse_algorithm(argv[4]);
    options.cache_words = m;
    options.threads = 1;
    options.objective = argc == 8 ? spattn::parse_plan_objective(argv[7]) : spattn::PlanObjective::words;

    using spattn::testing::random_floats;
    LineArray q(random_floats(n * d, 1)), k(random_floats(n * d, 2)), v(random_floats(n * d, 3));
    LineArray d_o(random_floats(n * d, 4));
    const std::vector<float> zeros(static_cast<size_t>(n * d));
    LineArray o(zeros), lse(std::vector<float>(static_cast<size_t>(n))), dq(zeros), dk(zeros), dv(zeros);
    auto in = [&](LineArray& x, int64_t last) {
      return spattn::TensorView<const float>::contiguous(x.data(), 1, 1, n, last);
    };
    auto out = [&](LineArray& x, int64_t last) {
      return spattn::TensorView<float>::contiguous(x.data(), 1, 1, n, last);
    };
    // The plan and the mask structures it walks are prepared once per mask and kept in the mask
    // (as a training loop reuses them); preparing them here keeps that one-time work out of the
    // measured call, whose I/O is what the ledger counts. Only the passes it runs are prepared (a
    // backward run needs the forward's O and LSE), so that a forward runs from its own smallest M.
    const spattn::AttentionShape shape{1, 1, 1, n, n, d, d};
    spattn::plan_attention(shape, mask, spattn::Pass::forward, options);
    if (pass == "bwd") spattn::plan_attention(shape, mask, spattn::Pass::backward, options);
    spattn::io::Ledger ledger(spattn::io::kDefaultLineWords);
    spattn::AttentionOptions counted = options;
    counted.ledger = &ledger;
    spattn::Plan plan;
    const auto forward = [&](const spattn::AttentionOptions& how) {
      return spattn::attention_forward(in(q, d), in(k, d), in(v, d), out(o, d), out(lse, 1), mask, how);
    };
    const auto backward = [&](const spattn::AttentionOptions& how) {
      return spattn::attention_backward(in(q, d), in(k, d), in(v, d), in(o, d), in(lse, 1), in(d_o, d), out(dq, d),
                                        out(dk, d), out(dv, d), mask, how);
    };
    // The measured call runs on a thread of its own: its stack starts on a page, wherever the
    // process's own stack begins. The main thread's stack begins below the environment and the
    // arguments, so the kernels' stack arrays met the lines differently with each environment's
    // size, and the simulated misses with them (flash's backward over a random mask at M = 512:
    // 1.21 or 1.30 misses per counted line, from one binary, by the length of one variable).
    const auto measured = [&](const auto& call) {
      std::exception_ptr error;
      std::thread([&] {
        try {
          CALLGRIND_START_INSTRUMENTATION;
          plan = call(options);
          CALLGRIND_STOP_INSTRUMENTATION;
        } catch (...) {
          error = std::current_exception();
        }
      }).join();
      if (error) std::rethrow_exception(error);
    };
    if (pass == "fwd") {
      forward(counted);
      measured(forward);
    } else {
      forward(options);
      backward(counted);
      measured(backward);
    }
    const spattn::io::Traffic lines = ledger.total_lines();
    // The check's lines: each input array starts on a line (LineArray).
    const int64_t line = ledger.line_words();
    const int64_t matrix_lines = (n * d + line - 1) / line, vector_lines = (n + line - 1) / line;
    const int64_t check_lines = pass == "fwd" ? 3 * matrix_lines : 5 * matrix_lines + vector_lines;
    std::printf(
        "algorithm %s%s\nreads %lld\nwrites %lld\nread_lines %lld\nwrite_lines %lld\nline_words %lld\ncheck_lines "
        "%lld\n",
        spattn::algorithm_name(plan.algorithm),
        plan.flash.tiles.find("dQ in the dK/dV pass") != std::string::npos && plan.algorithm == spattn::Algorithm::flash
            ? "/1loop"
            : "",
        static_cast<long long>(ledger.reads()),
        static_cast<long long>(ledger.writes()), static_cast<long long>(lines.reads),
        static_cast<long long>(lines.writes), static_cast<long long>(line), static_cast<long long>(check_lines));
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "cache_probe: %s\n", error.what());
    return 1;
  }
}
