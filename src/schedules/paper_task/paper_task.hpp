// The paper's task g = dL/dX (spattn/paper.hpp) as a schedule on the two-level memory: it runs the
// tiles it is given (src/plan/paper_plan.cpp chooses them) and predicts their words exactly.
#pragma once

#include "schedules/common/head_problem.hpp"
#include "schedules/common/tiled_matmul.hpp"
#include "schedules/flash/flash.hpp"
#include "schedules/small_cache/small_cache.hpp"

#include <spattn/io.hpp>
#include <spattn/types.hpp>

#include <cstdint>

namespace spattn::schedules {

// dO = O - E, streamed in chunks of whole rows (an O chunk and an E chunk of rows_per_chunk x d).
struct ResidualPass {
  int64_t rows_per_chunk = 1;
};

// Every tile of the task for one (n, d, M).
struct PaperTiles {
  Algorithm algorithm = Algorithm::flash;  // the attention tiling inside: flash or small_cache
  MatmulTiles q_product;                   // Q = A1 X and V = A3 Y: (n, d) x (d, d)
  MatmulTiles g_product;                   // g = A1^T dQ: (d, n) x (n, d)
  ResidualPass residual;
  FlashTiles flash_forward, flash_backward;
  SmallCacheTiles small_forward, small_backward;
};

// The task's operands in slow memory: the inputs a1, a2, a3, e (n x d), x, y (d x d); g (d x d).
struct PaperOperands {
  int64_t n = 0;
  int64_t d = 0;
  SlowMatrix<const float> a1, a2, a3, e, x, y;
  SlowMatrix<float> g;
  float scale = 1.0f;
};

// The words the task moves with `tiles`, exactly (the tests count them).
IoCount predict_paper_task(int64_t n, int64_t d, const PaperTiles& tiles);

// Runs the task with `tiles` on `fast`: Q = A1 X and V = A3 Y, the attention forward, dO = O - E,
// the attention backward, g = A1^T dQ; the intermediates live in slow memory it allocates.
void run_paper_task(io::FastMemory& fast, const PaperOperands& operands, const PaperTiles& tiles);

}  // namespace spattn::schedules
