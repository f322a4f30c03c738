// HeadShape printed (head_problem.hpp).
#include "schedules/common/head_problem.hpp"

#include <ostream>

namespace spattn::schedules {

std::ostream& operator<<(std::ostream& out, const HeadShape& shape) {
  return out << shape.seqlen_q << " x " << shape.seqlen_k << ", head_dim " << shape.head_dim << ", head_dim_v "
             << shape.head_dim_v;
}

}  // namespace spattn::schedules
