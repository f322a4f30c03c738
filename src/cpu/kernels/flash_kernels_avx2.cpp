// The AVX2 flash kernels (flash_kernels_isa.hpp): AVX2 + FMA, 8 lanes, 16 vector registers; score
// blocks hold up to 12 accumulators. An accumulating product over more than 8 inner rows holds a
// block of 6 accumulator rows x 2 vectors in registers across all of them; over fewer it streams
// the accumulator rows past up to 12 vectors of the inner tile (with so few inner rows, reloading
// them for every block of accumulator rows costs more than it saves: measured slower at d = 128,
// where the backward's inner tiles have 5 and 7 rows).
// The small-cache kernels (small_cache_kernels.hpp) of this set are compiled here too:
// outer-product blocks of 4 rows x 3 vectors, dot-product blocks of 4 x 2 outputs.
// Everything in this file, templates included, is compiled for this target (the build itself
// passes no -march flag); the library calls it only when the CPU reports support.
#include "cpu/kernels/flash_kernels_isa.hpp"

#if defined(SPATTN_KERNELS_X86)

// The standard headers first, for the baseline target: inline library code must not be compiled
// for this one (the linker could pick that copy for everyone).
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

#define SPATTN_KERNEL_NAMESPACE avx2_kernels
#include "cpu/kernels/flash_kernels_impl.hpp"
#include "cpu/kernels/small_cache_kernels_impl.hpp"
#include "cpu/kernels/small_cache_kernels_isa.hpp"

namespace spattn::schedules::flash_kernels::isa {

namespace {
using Cfg = avx2_kernels::Config<avx2_kernels::Lanes8, 12, 12, 6, 2>;
}  // namespace

void forward_avx2(const ForwardTile& t) { avx2_kernels::forward_step<Cfg>(t); }
void dq_avx2(const DqTile& t) { avx2_kernels::dq_step<Cfg>(t); }
void dkdv_avx2(const DkdvTile& t) { avx2_kernels::dkdv_step<Cfg>(t); }
void dq_from_scores_avx2(const DqFromScoresTile& t) { avx2_kernels::dq_from_scores_step<Cfg>(t); }

}  // namespace spattn::schedules::flash_kernels::isa

namespace spattn::schedules::small_cache_kernels::isa {

namespace {
namespace k = flash_kernels::avx2_kernels::small_cache;
}  // namespace
const Table kAvx2 = k::table<k::Config<flash_kernels::avx2_kernels::Lanes8, 4, 3, 4, 2>>();

}  // namespace spattn::schedules::small_cache_kernels::isa

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // SPATTN_KERNELS_X86
