// The density-adaptive small_cache's tile records printed (sparse_small_cache.hpp).
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <ostream>

namespace spattn::schedules {

std::ostream& operator<<(std::ostream& out, const SparseSweepTiles& tiles) {
  return out << "rows " << tiles.block_rows << " x cols " << tiles.block_cols << ", chunk " << tiles.chunk << ", run "
             << tiles.run;
}

std::ostream& operator<<(std::ostream& out, const SparseSmallCacheTiles& tiles) {
  out << "density-adaptive small_cache " << pass_name(tiles.pass) << " tiles for " << tiles.shape << ", " << tiles.nnz
      << " mask entries, M " << tiles.cache_words << ", L " << tiles.line_words << ": ";
  if (tiles.pass == Pass::forward) return out << "S " << tiles.scores << "; O " << tiles.output;
  return out << "P " << tiles.probs << "; dS " << tiles.d_scores << "; dQ " << tiles.dq << "; dK " << tiles.dk << "; dV "
             << tiles.dv;
}

}  // namespace spattn::schedules
