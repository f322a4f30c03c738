// The constants of scalar_exp (scalar_exp.hpp), defined out of line so that callers read them from
// this one line.
#include "cpu/kernels/scalar_exp.hpp"

namespace spattn::schedules::scalar_exp_detail {

const ScalarExpConstants kScalarExpConstants{
    0.693147180559945309,
    -104.0f,
    88.8f,
    6755399441055744.0f,   // 1.5 * 2^52, exact in a float
    1.44269504088896341f,  // 1 / ln 2
    1.0f,
    {1.0f / 2, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040, 1.0f / 40320}};

}  // namespace spattn::schedules::scalar_exp_detail
