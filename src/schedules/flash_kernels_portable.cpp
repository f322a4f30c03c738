// The portable flash kernels (flash_kernels_isa.hpp): 4-lane vectors with the baseline
// instruction set (SSE2 on x86-64, NEON on AArch64, scalar code elsewhere; plain floats for
// compilers without vector types), and the scalar steps for tiles narrower than a vector.
#define SPATTN_KERNEL_NAMESPACE portable_kernels
#include "schedules/flash_kernels_impl.hpp"

namespace spattn::schedules::flash_kernels::isa {

namespace {
using namespace portable_kernels;
// Score blocks hold up to 12 accumulators and accumulating blocks 12 vectors of the inner tile
// (16 vector registers).
#if defined(__GNUC__)
using PortableConfig = Config<Lanes4, 12, 12>;
#else
using PortableConfig = Config<Lanes1, 12, 12>;
#endif
// The scalar steps run only on tiles narrower than a vector: no register blocking (one chunk, one
// partial sum), the least code.
using ScalarConfig = Config<Lanes1, 1, 1>;
}  // namespace

void forward_scalar(const ForwardTile& t) { forward_step<ScalarConfig>(t); }
void dq_scalar(const DqTile& t) { dq_step<ScalarConfig>(t); }
void dkdv_scalar(const DkdvTile& t) { dkdv_step<ScalarConfig>(t); }

void forward_portable(const ForwardTile& t) { forward_step<PortableConfig>(t); }
void dq_portable(const DqTile& t) { dq_step<PortableConfig>(t); }
void dkdv_portable(const DkdvTile& t) { dkdv_step<PortableConfig>(t); }

}  // namespace spattn::schedules::flash_kernels::isa
