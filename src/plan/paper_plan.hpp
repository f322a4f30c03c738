// The paper task's choice (spattn/paper.hpp): its tiles for (n, d, M) and, under auto, the
// attention tiling with the fewer predicted words.
#pragma once

#include "schedules/paper_task/paper_task.hpp"

#include <spattn/paper.hpp>

#include <cstdint>

namespace spattn::plan_detail {

// The task's tiles. Throws InvalidArgument naming paper_gradient for sizes < 0, M < 1, an
// algorithm that is not a schedule, or M below what a piece needs (stating it).
schedules::PaperTiles paper_tiles(int64_t n, int64_t d, int64_t cache_words, Algorithm algorithm);

// The plan those tiles give: predicted words, the Theorem 1.1 bound and the ratio.
PaperPlan paper_plan(int64_t n, int64_t d, int64_t cache_words, const schedules::PaperTiles& tiles);

}  // namespace spattn::plan_detail
