// The tensor-core flash kernels' fixed tiles and shared-memory layouts (src/cuda/mma_kernels.cuh),
// plain C++ so that the plan of a call (device_plan.hpp) and the CPU tests use them without CUDA;
// __host__ __device__ under nvcc (the kernels read their layout at compile time).
#pragma once

#include "schedules/common/tile_math.hpp"  // SPATTN_HD

#include <spattn/types.hpp>  // Pass

#include <cstdint>

namespace spattn::device {

// 64 x 64 tiles: four warps per block, each owning a strip of 16 rows of the block's outer tile,
// the strip's products in 16 x 16 x 16 matrix tiles. Head dims are zero-padded to mma_dim(d, e).
constexpr int kMmaTile = 64;
constexpr int kMmaStrip = 16;
constexpr int kMmaThreads = 32 * kMmaTile / kMmaStrip;  // 128
// The dK/dV kernel: eight warps, two per strip, each with half of the output columns (its dK and dV
// accumulators take half the registers, so that two blocks fit an SM).
constexpr int kDkdvThreads = 2 * kMmaThreads;  // 256
constexpr int64_t kMmaMaxDim = 128;

// What the kernels and mma_layout divide by these: a tile of whole 16 x 16 matrix tiles and of
// whole strips; blocks of whole warps, one strip each; the partial tile's bit set in whole bytes
// and ending 32 bytes aligned (wmma's alignment, for the buffers after it); padded head dims of
// whole matrix tiles.
static_assert(kMmaStrip % 16 == 0 && kMmaTile % kMmaStrip == 0, "kMmaTile: whole strips of whole 16 x 16 tiles");
static_assert(kMmaThreads % 32 == 0 && kMmaThreads / 32 == kMmaTile / kMmaStrip, "a warp per strip");
static_assert(kDkdvThreads % 32 == 0 && kDkdvThreads / 32 == 2 * (kMmaTile / kMmaStrip),
              "the dK/dV kernel: two warps per strip");
static_assert(kMmaTile * kMmaTile % (8 * 32) == 0, "the bit set: whole bytes, the next buffer 32-byte aligned");
static_assert(kMmaMaxDim % 16 == 0 && kMmaMaxDim <= 128, "head dims padded to 32, 64 or 128");

// The padded head dim of a (d, e) pair: 32, 64 or 128 (0 when max(d, e) > kMmaMaxDim).
SPATTN_HD constexpr int mma_dim(int64_t d, int64_t e) {
  const int64_t m = d > e ? d : e;
  return m <= 32 ? 32 : m <= 64 ? 64 : m <= kMmaMaxDim ? 128 : 0;
}

// Byte offsets of a block's shared memory. Rows are padded (16-bit rows by 8 elements, fp32 rows
// by 4) so that a warp's 16 x 16 loads spread over the banks; every buffer starts 32-byte aligned
// (wmma needs it). The partial tile's bit set (kMmaTile^2 bits) comes first.
struct MmaLayout {
  int64_t ld16 = 0, ld_s = 0, ld_p = 0, ld_acc = 0, ld_scratch = 0;
  int64_t bits = 0, a = 0, b = 0, c = 0, d = 0, s = 0, p = 0, acc = 0, scratch = 0, stat0 = 0, stat1 = 0;
  int64_t bytes = 0;
};
// forward: a = Q, b = K, c = V, s = scores (fp32), p = P (16-bit), acc = O (fp32), stat0/1 = row
// max / sum. backward (dK/dV and dQ): a = K, b = V, c = Q, d = dO, s = P (fp32), p = P then dS
// (16-bit), scratch = one 16 x 16 fp32 tile per warp, stat0/1 = LSE / D of the query tile.
SPATTN_HD constexpr MmaLayout mma_layout(int dim, Pass pass) {
  MmaLayout l;
  l.ld16 = dim + 8;
  l.ld_s = kMmaTile + 4;
  l.ld_p = kMmaTile + 8;
  l.ld_acc = dim + 4;
  l.ld_scratch = kMmaStrip + 4;
  const int64_t tile16 = kMmaTile * l.ld16 * 2;
  int64_t at = kMmaTile * kMmaTile / 8;  // the bit set
  l.a = at;
  l.b = (at += tile16);
  l.c = (at += tile16);
  at += tile16;
  if (pass == Pass::backward) {
    l.d = at;
    at += tile16;
  }
  l.s = at;
  l.p = (at += kMmaTile * l.ld_s * 4);
  at += kMmaTile * l.ld_p * 2;
  if (pass == Pass::forward) {
    l.acc = at;
    at += kMmaTile * l.ld_acc * 4;
  } else {
    l.scratch = at;
    at += (kDkdvThreads / 32) * kMmaStrip * l.ld_scratch * 4;
  }
  l.stat0 = at;
  l.stat1 = (at += kMmaTile * 4);
  l.bytes = at + kMmaTile * 4;
  return l;
}

}  // namespace spattn::device
