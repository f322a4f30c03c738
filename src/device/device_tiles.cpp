// Host-side preparation for the CUDA backend (device_tiles.hpp).
#include "device/device_tiles.hpp"

#include "plan/dense_flash_tiles.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/convert.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace spattn::device {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Hands out consecutive regions of a layout.
struct Allocator {
  int64_t next = 0;
  int64_t take(int64_t words) {
    const int64_t at = next;
    next += words;
    return at;
  }
};

// 4-byte words of one partial tile's bit set (uint64 words, 2 each); none when dense.
int64_t bit_region(int64_t outer, int64_t inner, FlashMasking masking) {
  return masking == FlashMasking::block_sparse ? 2 * ((outer * inner + 63) / 64) : 0;
}

}  // namespace

ForwardLayout forward_layout(const HeadShape& s, const FlashTiles& t, FlashMasking masking) {
  const int64_t bq = t.block_q, bk = t.block_k, d = s.head_dim, e = s.head_dim_v;
  Allocator a;
  ForwardLayout l;
  l.bits = a.take(bit_region(bq, bk, masking));
  l.q = a.take(bq * d);
  l.acc = a.take(bq * e);
  l.row_max = a.take(bq);
  l.row_sum = a.take(bq);
  l.alpha = a.take(bq);
  l.k = a.take(bk * d);
  l.v = a.take(bk * e);
  l.s = a.take(bq * bk);
  l.words = a.next;
  return l;
}

DkdvLayout dkdv_layout(const HeadShape& s, const FlashTiles& t, FlashMasking masking) {
  const int64_t ck = t.dkdv_block_k, cq = t.dkdv_block_q, d = s.head_dim, e = s.head_dim_v;
  Allocator a;
  DkdvLayout l;
  l.bits = a.take(bit_region(ck, cq, masking));
  l.k = a.take(ck * d);
  l.v = a.take(ck * e);
  l.dk = a.take(ck * d);
  l.dv = a.take(ck * e);
  l.q = a.take(cq * d);
  l.d_o = a.take(cq * e);
  l.lse = a.take(cq);
  l.delta = a.take(cq);
  l.p = a.take(cq * ck);
  l.words = a.next;
  return l;
}

DqLayout dq_layout(const HeadShape& s, const FlashTiles& t, FlashMasking masking) {
  const int64_t bq = t.block_q, bk = t.block_k, d = s.head_dim, e = s.head_dim_v;
  Allocator a;
  DqLayout l;
  l.bits = a.take(bit_region(bq, bk, masking));
  l.q = a.take(bq * d);
  l.d_o = a.take(bq * e);
  l.lse = a.take(bq);
  l.delta = a.take(bq);
  l.dq = a.take(bq * d);
  l.k = a.take(bk * d);
  l.v = a.take(bk * e);
  l.p = a.take(bq * bk);
  l.words = a.next;
  return l;
}

int64_t device_smem_words(const HeadShape& shape, const FlashTiles& tiles, Pass pass,
                          FlashMasking masking) {
  if (pass == Pass::forward) return forward_layout(shape, tiles, masking).words;
  return std::max(dkdv_layout(shape, tiles, masking).words, dq_layout(shape, tiles, masking).words);
}

DeviceFlashTiles device_flash_tiles(const HeadShape& shape, int64_t smem_words, Pass pass,
                                    FlashMasking masking) {
  const int64_t minimum = schedules::flash_min_cache_words(shape, pass, masking);
  const int64_t smallest = device_smem_words(shape, FlashTiles{1, 1, 1, 1}, pass, masking);
  const int64_t needed = std::max(minimum, smallest);
  if (smem_words < needed) {
    fail("cuda flash ", pass_name(pass), ": shared memory of ", smem_words, " words (",
         4 * smem_words, " bytes) per block is below the ", needed, " words 1 x 1 tiles need at head_dim ",
         shape.head_dim, ", head_dim_v ", shape.head_dim_v);
  }
  // Lowering M never grows a tile, so the overflow shrinks; each step lowers M by at least 1.
  int64_t cache_words = smem_words;
  for (;;) {
    DeviceFlashTiles result;
    result.cache_words = cache_words;
    result.tiles = schedules::flash_tiles(shape, cache_words, pass, masking);
    result.smem_words = device_smem_words(shape, result.tiles, pass, masking);
    if (result.smem_words <= smem_words) return result;
    cache_words = std::max(minimum, cache_words - std::max<int64_t>(1, result.smem_words - smem_words));
    if (cache_words == minimum) {
      result.cache_words = minimum;
      result.tiles = schedules::flash_tiles(shape, minimum, pass, masking);
      result.smem_words = device_smem_words(shape, result.tiles, pass, masking);
      if (result.smem_words <= smem_words) return result;
      throw RuntimeError("cuda flash: no tiles fit in " + std::to_string(smem_words) +
                         " words of shared memory");
    }
  }
}

FlatTileLists flatten_tile_lists(const std::vector<const schedules::FlashTileLists*>& lists) {
  if (lists.empty()) fail("flatten_tile_lists: no lists");
  const schedules::FlashTileLists& first = *lists.front();
  FlatTileLists flat;
  flat.num_outer = first.num_outer_tiles();
  flat.num_inner = first.num_inner_tiles();
  flat.inner_block = first.inner_block;
  flat.bit_words = first.bit_words;
  flat.num_masks = static_cast<int64_t>(lists.size());
  int64_t entries = 0, partials = 0;
  for (const schedules::FlashTileLists* l : lists) {
    if (l->num_outer_tiles() != flat.num_outer || l->num_inner_tiles() != flat.num_inner ||
        l->inner_block != flat.inner_block || l->bit_words != flat.bit_words) {
      fail("flatten_tile_lists: masks re-blocked at different tilings (", l->num_outer_tiles(), " x ",
           l->num_inner_tiles(), " tiles vs ", flat.num_outer, " x ", flat.num_inner, ")");
    }
    entries += l->num_stored();
    partials += l->num_partial();
  }
  if (entries > kInt32Max || partials > kInt32Max) {
    fail("cuda flash: ", entries, " stored tiles (", partials,
         " partial) exceed the device lists' 32-bit indices");
  }
  flat.tile_ptr.reserve(static_cast<size_t>(flat.num_masks * (flat.num_outer + 1)));
  flat.partial_ptr.reserve(flat.tile_ptr.capacity());
  flat.entries.reserve(static_cast<size_t>(entries));
  flat.bits.reserve(static_cast<size_t>(partials * flat.bit_words));
  for (const schedules::FlashTileLists* l : lists) {
    const int64_t partial_base = static_cast<int64_t>(flat.bits.size()) / std::max<int64_t>(flat.bit_words, 1);
    // The device walks one entry per tile (2 * tile + partial): the runs are expanded here.
    for (int64_t i = 0; i <= flat.num_outer; ++i) {
      flat.tile_ptr.push_back(static_cast<int32_t>(static_cast<int64_t>(flat.entries.size())));
      flat.partial_ptr.push_back(static_cast<int32_t>(partial_base + l->partial_ptr[static_cast<size_t>(i)]));
      if (i < flat.num_outer) {
        l->for_each_tile(i, [&](int64_t tile, bool partial) { flat.entries.push_back(static_cast<int32_t>(2 * tile + (partial ? 1 : 0))); });
      }
    }
    flat.bits.insert(flat.bits.end(), l->bits.begin(), l->bits.end());
  }
  return flat;
}

tile_math::TileListsRef host_ref(const FlatTileLists& lists) {
  tile_math::TileListsRef ref;
  ref.tile_ptr = lists.tile_ptr.data();
  ref.partial_ptr = lists.partial_ptr.data();
  ref.entries = lists.entries.data();
  ref.bits = lists.bits.data();
  ref.num_outer = lists.num_outer;
  ref.num_inner = lists.num_inner;
  ref.inner_block = lists.inner_block;
  ref.bit_words = lists.bit_words;
  ref.num_masks = lists.num_masks;
  ref.dense = false;
  return ref;
}

Csr32 csr32(const Mask& mask, const char* what) {
  const int64_t rows = mask.seqlen_q(), cols = mask.seqlen_k(), nnz = mask.nnz();
  if (nnz > kInt32Max || rows > kInt32Max || cols > kInt32Max) {
    fail(what, ": a ", rows, " x ", cols, " mask with ", nnz, " attended pairs exceeds cuSPARSE's 32-bit indices");
  }
  // From the form the mask holds: no int64 CSR is expanded on the way, but for an element mask
  // held as int64.
  const sparse_formats::IntervalPattern* intervals = mask.row_intervals();
  const auto own = mask.csr32();
  sparse_formats::CsrPattern<int32_t> pattern =
      own ? sparse_formats::convert_index<int32_t>(*own)
      : intervals != nullptr ? sparse_formats::intervals_to_csr<int32_t>(*intervals)
      : mask.is_full()       ? sparse_formats::full_pattern<int32_t>(rows, cols)
                             : sparse_formats::convert_index<int32_t>(mask.csr());
  Csr32 csr;
  csr.num_rows = rows;
  csr.num_cols = cols;
  csr.row_ptr = std::move(pattern.row_ptr);
  csr.col = std::move(pattern.col_idx);
  return csr;
}

Csr32 csr32_transpose(const Csr32& csr) {
  Csr32 t;
  t.num_rows = csr.num_cols;
  t.num_cols = csr.num_rows;
  t.row_ptr.assign(static_cast<size_t>(csr.num_cols + 1), 0);
  for (int32_t c : csr.col) ++t.row_ptr[static_cast<size_t>(c) + 1];
  for (int64_t c = 0; c < csr.num_cols; ++c) t.row_ptr[static_cast<size_t>(c + 1)] += t.row_ptr[static_cast<size_t>(c)];
  std::vector<int32_t> next(t.row_ptr.begin(), t.row_ptr.end() - 1);
  t.col.resize(csr.col.size());
  t.perm.resize(csr.col.size());
  // Rows visited in order, so each transposed row's columns (the original rows) ascend.
  for (int64_t r = 0; r < csr.num_rows; ++r) {
    for (int32_t p = csr.row_ptr[static_cast<size_t>(r)]; p < csr.row_ptr[static_cast<size_t>(r + 1)]; ++p) {
      const int32_t at = next[static_cast<size_t>(csr.col[static_cast<size_t>(p)])]++;
      t.col[static_cast<size_t>(at)] = static_cast<int32_t>(r);
      t.perm[static_cast<size_t>(at)] = p;
    }
  }
  return t;
}

namespace {

void check_view(const char* where, const char* name, const ViewInfo& view) {
  int64_t numel = 1;
  for (int i = 0; i < 4; ++i) {
    const int64_t extent = view.shape[static_cast<size_t>(i)];
    if (extent < 0) fail(where, ": ", name, " has a negative extent ", extent, " in dimension ", i);
    numel *= extent;
  }
  if (view.data == nullptr && numel > 0) fail(where, ": ", name, " has no data but ", numel, " elements");
}

// `view` is (batch, heads, rows, cols).
void check_extents(const char* where, const char* name, const ViewInfo& view, int64_t batch,
                   int64_t heads, int64_t rows, int64_t cols, const char* expected) {
  check_view(where, name, view);
  const auto& s = view.shape;
  if (s[0] != batch || s[1] != heads || s[2] != rows || s[3] != cols) {
    fail(where, ": ", name, " is (", s[0], ", ", s[1], ", ", s[2], ", ", s[3], "), expected (", batch,
         ", ", heads, ", ", rows, ", ", cols, ") (", expected, ")");
  }
}

DeviceShape check_qkv(const char* where, const ViewInfo& q, const ViewInfo& k, const ViewInfo& v,
                      const std::vector<Mask>& masks) {
  check_view(where, "q", q);
  check_view(where, "k", k);
  check_view(where, "v", v);
  DeviceShape s;
  s.batch = q.shape[0];
  s.heads = q.shape[1];
  s.seqlen_q = q.shape[2];
  s.head_dim = q.shape[3];
  s.kv_heads = k.shape[1];
  s.seqlen_k = k.shape[2];
  s.head_dim_v = v.shape[3];
  check_extents(where, "k", k, s.batch, s.kv_heads, s.seqlen_k, s.head_dim, "batch, kv_heads, seqlen_k, head_dim");
  check_extents(where, "v", v, s.batch, s.kv_heads, s.seqlen_k, s.head_dim_v, "batch, kv_heads, seqlen_k, head_dim_v");
  if (s.kv_heads == 0 ? s.heads != 0 : s.heads % s.kv_heads != 0) {
    fail(where, ": q has ", s.heads, " heads, not a multiple of k's ", s.kv_heads, " heads");
  }
  if (s.head_dim == 0 || s.head_dim_v == 0) {
    fail(where, ": head_dim ", s.head_dim, " and head_dim_v ", s.head_dim_v, " must be positive on the device");
  }
  const auto num_masks = static_cast<int64_t>(masks.size());
  if (num_masks != 1 && num_masks != s.heads) {
    fail(where, ": ", num_masks, " masks given; expected 1 (shared) or one per q head (", s.heads, ")");
  }
  for (int64_t m = 0; m < num_masks; ++m) {
    const Mask& mask = masks[static_cast<size_t>(m)];
    if (mask.seqlen_q() != s.seqlen_q || mask.seqlen_k() != s.seqlen_k) {
      fail(where, ": mask ", m, " is ", mask.seqlen_q(), " x ", mask.seqlen_k(), ", but q has seqlen ",
           s.seqlen_q, " and k has seqlen ", s.seqlen_k);
    }
  }
  return s;
}

}  // namespace

DeviceShape check_forward(const char* where, const ViewInfo& q, const ViewInfo& k, const ViewInfo& v,
                          const ViewInfo& o, const ViewInfo& lse, const std::vector<Mask>& masks) {
  const DeviceShape s = check_qkv(where, q, k, v, masks);
  check_extents(where, "o", o, s.batch, s.heads, s.seqlen_q, s.head_dim_v, "batch, heads, seqlen_q, head_dim_v");
  check_extents(where, "lse", lse, s.batch, s.heads, s.seqlen_q, 1, "batch, heads, seqlen_q, 1");
  return s;
}

DeviceShape check_backward(const char* where, const ViewInfo& q, const ViewInfo& k,
                           const ViewInfo& v, const ViewInfo& o, const ViewInfo& lse,
                           const ViewInfo& d_o, const ViewInfo& dq, const ViewInfo& dk,
                           const ViewInfo& dv, const std::vector<Mask>& masks) {
  const DeviceShape s = check_forward(where, q, k, v, o, lse, masks);
  check_extents(where, "d_o", d_o, s.batch, s.heads, s.seqlen_q, s.head_dim_v, "the shape of o");
  check_extents(where, "dq", dq, s.batch, s.heads, s.seqlen_q, s.head_dim, "the shape of q");
  check_extents(where, "dk", dk, s.batch, s.kv_heads, s.seqlen_k, s.head_dim, "the shape of k");
  check_extents(where, "dv", dv, s.batch, s.kv_heads, s.seqlen_k, s.head_dim_v, "the shape of v");
  return s;
}

float resolve_scale(const char* where, const std::optional<double>& scale, int64_t head_dim) {
  const double value = scale.value_or(1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(head_dim, 1))));
  if (!std::isfinite(value)) fail(where, ": scale = ", value, " must be finite");
  return static_cast<float>(value);
}

}  // namespace spattn::device
