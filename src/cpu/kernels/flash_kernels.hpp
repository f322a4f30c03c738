// The arithmetic of the flash schedule on tiles already in fast memory: one call per (outer tile,
// inner tile) pair of a loop nest. The schedules (flash_forward.cpp, flash_backward.cpp) move the
// data; these only compute, on contiguous fast buffers, with no allocation.
//
// Layout (why: the innermost loops run over contiguous memory, vectorized over the outer tile's
// rows, and every accumulation runs in a fixed order, so results do not depend on the vector
// width, on blocking or on threads):
//   - the outer tile's operands that meet the inner tile in a score product are held transposed,
//     (head_dim, rows_outer): Q^T in the forward and the dQ pass (and dO^T there), K^T, V^T in the
//     dK/dV pass;
//   - the inner tile is row-major (rows_inner, head_dim);
//   - the score tile is (rows_inner, rows_outer), row-major: s[i][o];
//   - accumulators (O, dQ, dK, dV) are row-major (rows_outer, head_dim).
// A partial tile's bit set (flash_mask.hpp) holds element (o, i) at bit o * bit_stride + i
// (bit_stride = the inner tile size the mask was built for).
//
// Each step exists in a few instruction-set variants (portable C++ with GCC/Clang vector types,
// AVX2+FMA, AVX-512, AVX-512 with AVX512_BF16: flash_kernels_isa.hpp), chosen once at run time for
// this CPU (kernel_isa()).
//
// bfloat16 pairs: where the outer tile's operands of a score product hold bfloat16 values (a
// bfloat16 call: they were widened exactly as they were loaded) and the kernels in use take them
// (packs_bf16_pairs), the schedule packs that tile in place into pairs (pack_bf16_pairs) and says
// so (q_packed, do_packed, k_packed, v_packed: the tile's pointer then points at the pairs). The
// flags fill the padding after `scale`, so the structs are no larger than without them: at the
// cache simulator's smallest M a larger one pushed the call's stack past the LRU's headroom. The
// score product then multiplies two bfloat16s at a time (vdpbf16ps), into float32 sums; the inner
// tile's rows are converted to pairs as the product goes, exactly as well. The backward steps'
// accumulating products (dS K, P^T dO, dS^T Q) then take pairs of inner rows too: the inner
// tile's exactly, P and dS rounded to bfloat16 (flash_kernels_pairs.hpp, accumulate_product_pairs).
// The forward's P V stays float32 (flash_kernels_impl.hpp, forward_step, says why).
// Within one variant every result is a fixed function of the tile shapes, so bit-identical for any
// thread count and across runs; between variants the last bits may differ (vector widths change
// the register blocking and so the partial sums of a score product; the portable variant has no
// fused multiply-add).
#pragma once

#include <cstdint>

namespace spattn::schedules::flash_kernels {

// The forward's inner step: S = scale K Q^T, masked entries -inf, then FlashAttention's online
// softmax per query row o (m' = max(m, max_i S), P = exp(S - m'), l' = l e^{m - m'} + sum_i P,
// acc' = acc e^{m - m'} + P^T V). A row whose scores are all -inf so far is left unchanged.
struct ForwardTile {
  const float* q_t = nullptr;  // (d, rows_q), the query tile transposed
  const float* k = nullptr;    // (rows_k, d)
  const float* v = nullptr;    // (rows_k, e)
  int64_t rows_q = 0, rows_k = 0, d = 0, e = 0;
  float scale = 1.0f;
  bool q_packed = false;           // q_t holds that tile as bfloat16 pairs (pack_bf16_pairs)
  const uint64_t* bits = nullptr;  // partial tile; nullptr when full
  int64_t bit_stride = 0;          // block_k
  float* s = nullptr;              // (rows_k, rows_q) scratch: S, then P
  float* row_max = nullptr;        // (rows_q)
  float* row_sum = nullptr;        // (rows_q)
  float* acc = nullptr;            // (rows_q, e)
};

// The dQ pass's inner step: P = exp(scale K Q^T - LSE) (0 where masked or LSE = -inf),
// dS = P ∘ (V dO^T - D), dQ += dS^T K (the scale is applied by the caller, once).
struct DqTile {
  const float* q_t = nullptr;    // (d, rows_q)
  const float* do_t = nullptr;   // (e, rows_q)
  const float* lse = nullptr;    // (rows_q)
  const float* delta = nullptr;  // (rows_q)
  const float* k = nullptr;      // (rows_k, d)
  const float* v = nullptr;      // (rows_k, e)
  int64_t rows_q = 0, rows_k = 0, d = 0, e = 0;
  float scale = 1.0f;
  bool q_packed = false, do_packed = false;  // q_t, do_t hold bfloat16 pairs (pack_bf16_pairs)
  const uint64_t* bits = nullptr;
  int64_t bit_stride = 0;  // block_k
  float* s = nullptr;      // (rows_k, rows_q) scratch: P, then dS
  float* dq = nullptr;     // (rows_q, d)
};

// The dK/dV pass's inner step: P = exp(scale Q K^T - LSE), dV += P^T dO, dS = P ∘ (dO V^T - D),
// dK += dS^T Q (scale applied by the caller).
struct DkdvTile {
  const float* k_t = nullptr;    // (d, rows_k)
  const float* v_t = nullptr;    // (e, rows_k)
  const float* q = nullptr;      // (rows_q, d)
  const float* d_o = nullptr;    // (rows_q, e)
  const float* lse = nullptr;    // (rows_q)
  const float* delta = nullptr;  // (rows_q)
  int64_t rows_k = 0, rows_q = 0, d = 0, e = 0;
  float scale = 1.0f;
  bool k_packed = false, v_packed = false;  // k_t, v_t hold bfloat16 pairs (pack_bf16_pairs)
  // Leave dS in s for dq_from_scores_tile: the vector steps always do; the scalar step (tiles
  // narrower than a vector) works pair by pair and writes s only when asked, since those stores
  // are a real cache's traffic beside the tiles at the smallest M.
  bool keep_scores = false;
  const uint64_t* bits = nullptr;
  int64_t bit_stride = 0;  // dkdv_block_q
  float* s = nullptr;      // (rows_q, rows_k) scratch: P, then dS
  float* dk = nullptr;     // (rows_k, d)
  float* dv = nullptr;     // (rows_k, e)
};

// The fused dK/dV pass's dQ step (FlashTiles::dq_in_dkdv), after dkdv_tile on the same tile:
// dQ += dS K, with dS the (rows_q, rows_k) tile dkdv_tile leaves in its scratch s (0 wherever the
// pair is masked) and K the key tile's rows, already scaled by the call's scale. dS is transposed
// into s_t first, so that the product is the accumulating product of the other steps (dQ's rows
// add the key rows in order: a fixed function of the tile shapes); a partial tile skips the
// blocks of key rows none of a query row's pairs attends, as the other products do. float32 only.
struct DqFromScoresTile {
  const float* s = nullptr;  // (rows_q, rows_k): dS
  const float* k = nullptr;  // (rows_k, d): scale K
  int64_t rows_q = 0, rows_k = 0, d = 0;
  const uint64_t* bits = nullptr;  // the dkdv_tile's partial tile (key o, query i at o * bit_stride + i)
  int64_t bit_stride = 0;
  float* s_t = nullptr;      // (rows_k, rows_q) scratch
  float* dq = nullptr;       // (rows_q, d)
};

// avx512_bf16: the avx512 kernels, whose score products take bfloat16 pairs (vdpbf16ps) where the
// schedule packs them; on float32 tiles the two sets compute the same bits.
enum class KernelIsa : uint8_t { portable, avx2, avx512, avx512_bf16 };
const char* kernel_isa_name(KernelIsa isa);  // "portable", "avx2", "avx512", "avx512_bf16"

// Whether this CPU (and build) can run `isa`.
bool kernel_isa_supported(KernelIsa isa);
// The set in use: the one the environment variable SPATTN_KERNELS names (portable, avx2, avx512
// or avx512_bf16; InvalidArgument when unknown or unsupported here), else the widest supported one,
// unless set_kernel_isa chose another. Decided on first use; the schedules ask before they start.
KernelIsa kernel_isa();
// For tests and measurements: use `isa` from now on (process-wide). Throws InvalidArgument when
// it is not supported here.
void set_kernel_isa(KernelIsa isa);

// The inner rows a kernel takes at a time (a tile's last block may be shorter and costs about as
// much as a whole one): the planner keeps inner tiles whole multiples of it where it can
// (src/plan/dense_flash_tiles.cpp).
inline constexpr int kBlockRows = 8;

// The widest lane type's lanes (AVX-512: 16 floats; AVX2's 8 divide it). The score products run
// over a tile's outer rows in chunks of this many, and a tile whose rows are not a multiple of it
// recomputes a whole chunk for its last rows (flash_kernels_products.hpp, score_block): the planner
// keeps large outer tiles multiples of it (src/plan/dense_flash_tiles.cpp).
inline constexpr int kOuterChunkRows = 16;

// The widest head dim (d or e) whose tiles may be packed as pairs: the score product converts a
// block of inner rows to pairs on the stack.
inline constexpr int64_t kMaxPairWidth = 512;
// Whether the kernels in use take an outer tile of `rows_outer` rows and `width` (d or e) rows of
// the transposed layout as bfloat16 pairs: the avx512_bf16 set, a tile of at least a vector of
// rows (narrower ones take the scalar steps) and width <= kMaxPairWidth.
bool packs_bf16_pairs(int64_t rows_outer, int64_t width);
// Packs an outer tile (width, rows) row-major, whose floats are bfloat16 values (a bfloat16 call's
// tiles), in place into (ceil(width / 2), rows) pairs: pair (x, r) holds element (2x, r) in its
// low 16 bits and (2x + 1, r) in its high ones (0 past an odd width). Returns the pairs, which
// take the first half of the tile's bytes. Only where packs_bf16_pairs(rows, width).
const uint32_t* pack_bf16_pairs(float* tile, int64_t width, int64_t rows);

void forward_tile(const ForwardTile& tile);
void dq_tile(const DqTile& tile);
void dkdv_tile(const DkdvTile& tile);
void dq_from_scores_tile(const DqFromScoresTile& tile);

}  // namespace spattn::schedules::flash_kernels
