// The avx512_bf16 flash kernels (flash_kernels_isa.hpp): the avx512 set's configuration
// (flash_kernels_avx512.cpp) compiled again with AVX512_BF16, whose score products take the
// outer tiles a bfloat16 call packs into pairs (flash_kernels_pairs.hpp). On float32 tiles it runs
// the avx512 set's code, so the two give the same bits there. Its small-cache kernels are the
// avx512 set's (small_cache_kernels.cpp).
#include "cpu/kernels/flash_kernels_isa.hpp"

#if defined(SPATTN_KERNELS_X86)

// The standard headers first, for the baseline target (flash_kernels_avx512.cpp says why).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512dq,avx512bf16,avx2,fma,prefer-vector-width=512")
#endif

#define SPATTN_KERNEL_NAMESPACE avx512_bf16_kernels
#include "cpu/kernels/flash_kernels_impl.hpp"
#include "cpu/kernels/flash_kernels_pairs.hpp"

namespace spattn::schedules::flash_kernels::isa {

namespace {
namespace k = avx512_bf16_kernels;
// Two instantiations of each step, each a function of its own: the avx512 set's configuration
// for float32 tiles (its code, so its bits), and the same with pair products for packed tiles.
// (One function holding both kinds of product made GCC 12 spill the float products'
// accumulators: the float32 steps ran 1.6x slower.)
using FloatCfg = k::Config<k::Lanes16, 16, 24, 0, 0>;
using PairCfg = k::Config<k::Lanes16, 16, 24, 0, 0, true>;

template <typename Cfg>
__attribute__((noinline)) void forward_with(const ForwardTile& t) { k::forward_step<Cfg>(t); }
template <typename Cfg>
__attribute__((noinline)) void dq_with(const DqTile& t) { k::dq_step<Cfg>(t); }
template <typename Cfg>
__attribute__((noinline)) void dkdv_with(const DkdvTile& t) { k::dkdv_step<Cfg>(t); }
}  // namespace

void forward_avx512_bf16(const ForwardTile& t) {
  if (t.q_packed) return forward_with<PairCfg>(t);
  forward_with<FloatCfg>(t);
}
void dq_avx512_bf16(const DqTile& t) {
  if (t.q_packed || t.do_packed) return dq_with<PairCfg>(t);
  dq_with<FloatCfg>(t);
}
void dkdv_avx512_bf16(const DkdvTile& t) {
  if (t.k_packed || t.v_packed) return dkdv_with<PairCfg>(t);
  dkdv_with<FloatCfg>(t);
}
const uint32_t* pack_bf16_pairs_avx512_bf16(float* tile, int64_t width, int64_t rows) {
  return k::pack_pairs_in_place(tile, width, rows);
}

}  // namespace spattn::schedules::flash_kernels::isa

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // SPATTN_KERNELS_X86
