// The portable flash kernels (flash_kernels_isa.hpp): 4-lane vectors with the baseline
// instruction set (SSE2 on x86-64, NEON on AArch64, scalar code elsewhere; plain floats for
// compilers without vector types), and the scalar steps for tiles narrower than a vector. The
// portable small-cache kernels (small_cache_kernels.hpp) are compiled here too.
#define SPATTN_KERNEL_NAMESPACE portable_kernels
#include "cpu/kernels/flash_kernels_impl.hpp"
#include "cpu/kernels/flash_kernels_scalar.hpp"
#include "cpu/kernels/small_cache_kernels_impl.hpp"
#include "cpu/kernels/small_cache_kernels_isa.hpp"

namespace spattn::schedules::flash_kernels::isa {

namespace {
using namespace portable_kernels;
// Score blocks hold up to 12 accumulators and streamed accumulating blocks 12 vectors of the inner
// tile (16 vector registers).
#if defined(__GNUC__)
using PortableConfig = Config<Lanes4, 12, 12, 0, 0>;
#else
using PortableConfig = Config<Lanes1, 12, 12, 0, 0>;
#endif
}  // namespace

// Tiles narrower than a vector: plain loops with little state (flash_kernels_scalar.hpp).
void forward_scalar(const ForwardTile& t) { scalar::forward(t); }
void dq_scalar(const DqTile& t) { scalar::dq(t); }
void dkdv_scalar(const DkdvTile& t) { scalar::dkdv(t); }

void forward_portable(const ForwardTile& t) { forward_step<PortableConfig>(t); }
void dq_portable(const DqTile& t) { dq_step<PortableConfig>(t); }
void dkdv_portable(const DkdvTile& t) { dkdv_step<PortableConfig>(t); }
void dq_from_scores_portable(const DqFromScoresTile& t) { dq_from_scores_step<PortableConfig>(t); }

}  // namespace spattn::schedules::flash_kernels::isa

namespace spattn::schedules::small_cache_kernels::isa {

namespace {
namespace k = flash_kernels::portable_kernels::small_cache;
#if defined(__GNUC__)
using Lanes = flash_kernels::portable_kernels::Lanes4;
#else
using Lanes = flash_kernels::portable_kernels::Lanes1;
#endif
}  // namespace
// Outer-product blocks of 4 rows x 2 vectors, dot-product blocks of 4 x 2 outputs (16 registers).
const Table kPortable = k::table<k::Config<Lanes, 4, 2, 4, 2>>();

}  // namespace spattn::schedules::small_cache_kernels::isa
