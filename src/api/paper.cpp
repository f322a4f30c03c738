// paper_gradient (spattn/paper.hpp): validate, take the plan's tiles (plan/paper_plan.hpp), run
// the task's schedule (schedules/paper_task).
#include <spattn/paper.hpp>

#include "plan/paper_plan.hpp"
#include "schedules/paper_task/paper_task.hpp"

#include <spattn/error.hpp>

#include <cmath>
#include <utility>

namespace spattn {

PaperPlan paper_gradient(const PaperInputs& in, float* g, int64_t cache_words, Algorithm algorithm,
                         io::Ledger* ledger) {
  const int64_t n = in.n, d = in.d;
  const schedules::PaperTiles tiles = plan_detail::paper_tiles(n, d, cache_words, algorithm);
  if (n > 0 && d > 0) {
    const std::pair<const char*, const float*> inputs[] = {
        {"a1", in.a1}, {"a2", in.a2}, {"a3", in.a3}, {"e", in.e}, {"x", in.x}, {"y", in.y}};
    for (const auto& [name, pointer] : inputs) {
      if (pointer == nullptr) fail("paper_gradient: ", name, " is null but n = ", n, ", d = ", d);
    }
  }
  if (d > 0 && g == nullptr) fail("paper_gradient: g is null but d = ", d);
  if (!std::isfinite(in.scale)) fail("paper_gradient: scale = ", in.scale, " must be finite");

  auto matrix = [](const float* p, int64_t rows, int64_t cols) { return io::SlowMatrix<const float>(p, rows, cols, cols); };
  const schedules::PaperOperands operands{n,
                                          d,
                                          matrix(in.a1, n, d),
                                          matrix(in.a2, n, d),
                                          matrix(in.a3, n, d),
                                          matrix(in.e, n, d),
                                          matrix(in.x, d, d),
                                          matrix(in.y, d, d),
                                          io::SlowMatrix<float>::dense(g, d, d),
                                          in.scale};
  const char* name = tiles.algorithm == Algorithm::flash ? "paper gradient (flash)" : "paper gradient (small_cache)";
  io::FastMemory fast(cache_words, ledger, name);
  schedules::run_paper_task(fast, operands, tiles);
  return plan_detail::paper_plan(n, d, cache_words, tiles);
}

}  // namespace spattn
