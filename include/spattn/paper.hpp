// The paper's own task (theory.md section 2): the gradient g = dL/dX of
//   L(X) = 1/2 || softmax(scale * A1 X A2^T) A3 Y - E ||_F^2
// computed from the inputs on the two-level memory, with either attention tiling, so that the
// whole of Theorem 1.1 (its n d^3 and n d^2 terms come from the d x d products) is exercised.
//
// The schedule: Q = A1 X and V = A3 Y (tiled products, written to slow memory), K = A2; the
// attention forward (O, LSE); dO = O - E (one streamed pass); the attention backward (dQ; dK and
// dV are computed too: the schedules produce all three, which costs a constant factor the task
// does not need); g = scale * A1^T dQ (a tiled product). Predicted exactly like the attention
// schedules (tests: counted == predicted).
#pragma once

#include <spattn/bounds.hpp>
#include <spattn/io.hpp>
#include <spattn/plan.hpp>

#include <cstdint>
#include <string>

namespace spattn {

struct PaperInputs {
  int64_t n = 0;              // sequence length
  int64_t d = 0;              // head dimension
  const float* a1 = nullptr;  // (n, d) row-major
  const float* a2 = nullptr;  // (n, d)
  const float* a3 = nullptr;  // (n, d)
  const float* e = nullptr;   // (n, d), the target
  const float* x = nullptr;   // (d, d)
  const float* y = nullptr;   // (d, d)
  float scale = 1.0f;         // the paper has 1
};

struct PaperPlan {
  int64_t n = 0;
  int64_t d = 0;
  int64_t cache_words = 0;
  Algorithm algorithm = Algorithm::flash;  // the attention tiling inside
  int64_t reads = 0;                       // predicted words, the whole task
  int64_t writes = 0;
  bounds::Bound bound;                     // Theorem 1.1 for (n, d, M)
  double ratio_to_bound = 0.0;
  int64_t total() const { return reads + writes; }
  std::string to_string() const;
};

// Predicts the task with `algorithm` (flash, small_cache, or automatic: the smaller total).
// Throws InvalidArgument for sizes < 0, or M below what the chosen pieces need (stating it).
PaperPlan plan_paper_gradient(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm);

// Runs the task: g (d, d) row-major receives dL/dX. Counted into `ledger` when it is not null.
// Validation (null pointers with n, d > 0; finite scale; feasible M) happens before anything is
// written.
PaperPlan paper_gradient(const PaperInputs& inputs, float* g, int64_t cache_words,
                         Algorithm algorithm, io::Ledger* ledger = nullptr);

}  // namespace spattn
