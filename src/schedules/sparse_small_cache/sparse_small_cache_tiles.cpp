// The density-adaptive small_cache's tile records printed (sparse_small_cache.hpp).
#include "schedules/sparse_small_cache/sparse_small_cache.hpp"

#include <ostream>

namespace spattn::schedules {

std::ostream& operator<<(std::ostream& out, const SparseSweepTiles& tiles) {
  out << "rows " << tiles.block_rows << " x cols " << tiles.block_cols << ", chunk " << tiles.chunk;
  if (tiles.run > 1) out << ", run " << tiles.run;
  return out;
}

std::ostream& print_tile_list(std::ostream& out, const SparseSmallCacheTiles& tiles) {
  if (tiles.pass == Pass::forward) return out << "S " << tiles.scores << "; O " << tiles.output;
  return out << "P " << tiles.probs << "; dS " << tiles.d_scores << "; dQ " << tiles.dq << "; dK " << tiles.dk << "; dV "
             << tiles.dv;
}

std::ostream& operator<<(std::ostream& out, const SparseSmallCacheTiles& tiles) {
  out << "density-adaptive small_cache " << pass_name(tiles.pass) << " tiles for " << tiles.shape << ", " << tiles.nnz
      << " mask entries, M " << tiles.cache_words << ", L " << tiles.line_words << ": ";
  return print_tile_list(out, tiles);
}

}  // namespace spattn::schedules
