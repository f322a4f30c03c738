// The flash kernels' entry points per instruction set (flash_kernels.hpp chooses among them).
// Each set lives in a translation unit of its own, compiled for that target:
//   portable  flash_kernels_portable.cpp  4-lane vectors, baseline instructions; and the scalar
//                                         steps every set uses for tiles narrower than a vector
//   avx2      flash_kernels_avx2.cpp      8 lanes, AVX2 + FMA (x86-64 with GCC or Clang only)
//   avx512    flash_kernels_avx512.cpp    16 lanes, AVX-512 F/VL/BW/DQ (x86-64 with GCC or Clang)
//   avx512_bf16  flash_kernels_avx512_bf16.cpp  the same, with AVX512_BF16's pair products
#pragma once

#include "cpu/kernels/flash_kernels.hpp"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define SPATTN_KERNELS_X86 1
#endif

namespace spattn::schedules::flash_kernels::isa {

void forward_scalar(const ForwardTile& t);
void dq_scalar(const DqTile& t);
void dkdv_scalar(const DkdvTile& t);

void forward_portable(const ForwardTile& t);
void dq_portable(const DqTile& t);
void dkdv_portable(const DkdvTile& t);
void dq_from_scores_portable(const DqFromScoresTile& t);

#if defined(SPATTN_KERNELS_X86)
void forward_avx2(const ForwardTile& t);
void dq_avx2(const DqTile& t);
void dkdv_avx2(const DkdvTile& t);
void dq_from_scores_avx2(const DqFromScoresTile& t);

void forward_avx512(const ForwardTile& t);
void dq_avx512(const DqTile& t);
void dkdv_avx512(const DkdvTile& t);
void dq_from_scores_avx512(const DqFromScoresTile& t);

void forward_avx512_bf16(const ForwardTile& t);
void dq_avx512_bf16(const DqTile& t);
void dkdv_avx512_bf16(const DkdvTile& t);
const uint32_t* pack_bf16_pairs_avx512_bf16(float* tile, int64_t width, int64_t rows);
#endif

}  // namespace spattn::schedules::flash_kernels::isa
