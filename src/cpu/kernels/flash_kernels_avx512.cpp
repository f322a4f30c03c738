// The AVX-512 flash kernels (flash_kernels_isa.hpp): AVX-512 F/VL/BW/DQ, 16 lanes; score blocks
// hold up to 16 accumulators and streamed accumulating blocks 24 vectors of the inner tile (32
// vector registers; a register-held accumulator block measured no faster here, so this set always
// streams). The small-cache kernels (small_cache_kernels.hpp) of this set are compiled here too:
// outer-product blocks of 6 rows x 4 vectors, dot-product blocks of 4 x 4 outputs.
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
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512")
#endif

#define SPATTN_KERNEL_NAMESPACE avx512_kernels
#include "cpu/kernels/flash_kernels_impl.hpp"
#include "cpu/kernels/small_cache_kernels_impl.hpp"
#include "cpu/kernels/small_cache_kernels_isa.hpp"

namespace spattn::schedules::flash_kernels::isa {

namespace {
using Cfg = avx512_kernels::Config<avx512_kernels::Lanes16, 16, 24, 0, 0>;
}  // namespace

void forward_avx512(const ForwardTile& t) { avx512_kernels::forward_step<Cfg>(t); }
void dq_avx512(const DqTile& t) { avx512_kernels::dq_step<Cfg>(t); }
void dkdv_avx512(const DkdvTile& t) { avx512_kernels::dkdv_step<Cfg>(t); }
void dq_from_scores_avx512(const DqFromScoresTile& t) { avx512_kernels::dq_from_scores_step<Cfg>(t); }

}  // namespace spattn::schedules::flash_kernels::isa

namespace spattn::schedules::small_cache_kernels::isa {

namespace {
namespace k = flash_kernels::avx512_kernels::small_cache;
}  // namespace
const Table kAvx512 = k::table<k::Config<flash_kernels::avx512_kernels::Lanes16, 6, 4, 4, 4>>();

}  // namespace spattn::schedules::small_cache_kernels::isa

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // SPATTN_KERNELS_X86
