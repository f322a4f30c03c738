// The block-sparse flash path on the device: plan, build (cached) tile lists, launch.
#include "cuda/flash.hpp"

#include "mask/mask_cache.hpp"
#include "cuda/check.hpp"
#include "cuda/device_buffer.hpp"
#include "cuda/flash_lists_device.hpp"
#include "cuda/flash_kernels.hpp"
#include "cuda/mma_kernels.hpp"
#include "device/device_lists.hpp"
#include "device/device_plan.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <type_traits>

namespace spattn::cuda::detail {
namespace {

using device::FlatTileLists;
using schedules::FlashMasking;
using schedules::FlashTiles;

// The masks' lists for one direction, built on the host by build_flash_mask (the mask's cached
// FlashMask), flattened and uploaded.
std::shared_ptr<const DeviceLists> upload_host_built(const std::vector<Mask>& masks,
                                                     const FlashTiles& tiles, Pass pass,
                                                     bool key_cols) {
  std::vector<std::shared_ptr<const schedules::FlashMask>> flash_masks;
  std::vector<const schedules::FlashTileLists*> lists;
  for (const Mask& mask : masks) {
    flash_masks.push_back(spattn::detail::cache_of(mask).flash(mask, tiles, pass));
    lists.push_back(key_cols ? &flash_masks.back()->key_cols : &flash_masks.back()->query_rows);
  }
  const FlatTileLists flat = device::flatten_tile_lists(lists);
  auto result = std::make_shared<DeviceLists>();
  result->tile_ptr = DeviceBuffer<int32_t>(flat.tile_ptr);
  result->partial_ptr = DeviceBuffer<int32_t>(flat.partial_ptr);
  result->entries = DeviceBuffer<int32_t>(flat.entries);
  result->bits = DeviceBuffer<uint64_t>(flat.bits);
  result->ref = device::host_ref(flat);
  result->ref.tile_ptr = result->tile_ptr.data();
  result->ref.partial_ptr = result->partial_ptr.data();
  result->ref.entries = result->entries.data();
  result->ref.bits = result->bits.data();
  result->keep_alive = masks;
  return result;
}

std::shared_ptr<const DeviceLists> build_lists(const std::vector<Mask>& masks,
                                               const FlashTiles& tiles, Pass pass, bool key_cols,
                                               device::ListsBuilder builder) {
#if defined(SPATTN_FLASH_EMULATION)
  // The CPU emulation (tests/cuda/emulation) compiles this file as C++ without Thrust's CUDA
  // system: it runs the host-built lists (the Thrust algorithm is tested on the CPU by
  // thrust_flash_lists_test, and on a device by cuda_flash_lists_test).
  static_cast<void>(builder);
  return upload_host_built(masks, tiles, pass, key_cols);
#else
  if (builder == device::ListsBuilder::host) return upload_host_built(masks, tiles, pass, key_cols);
  return build_lists_on_device(masks, tiles, key_cols);
#endif
}

// Tile lists built once per (device, masks, tiles, pass, direction) and reused: a training loop
// calls with the same masks every step. Bounded: cleared when it holds kMaxEntries.
class ListCache {
 public:
  using Key = std::tuple<int, std::vector<const void*>, int, int64_t, int64_t, int64_t, int64_t, int>;
  static constexpr size_t kMaxEntries = 64;

  std::shared_ptr<const DeviceLists> get(const std::vector<Mask>& masks, const FlashTiles& tiles,
                                         Pass pass, bool key_cols) {
    int device = 0;
    SPATTN_CUDA_CHECK(cudaGetDevice(&device));
    std::vector<const void*> identity;
    for (const Mask& mask : masks) identity.push_back(&spattn::detail::cache_of(mask));
    const Key key{device, identity, static_cast<int>(pass), tiles.block_q, tiles.block_k,
                  tiles.dkdv_block_q, tiles.dkdv_block_k, key_cols ? 1 : 0};
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(key);
    if (found != entries_.end()) return found->second;
    if (entries_.size() >= kMaxEntries) entries_.clear();
    // The host-built lists stay the default until the device build has passed
    // cuda_flash_lists_test on a GPU (bench/device_check.sh); ListsBuilder::thrust builds them on
    // the device from the mask's cached CSR.
    auto lists = build_lists(masks, tiles, pass, key_cols, device::ListsBuilder::host);
    entries_.emplace(key, lists);
    return lists;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const DeviceLists>> entries_;
};

ListCache& list_cache() {
  static ListCache cache;
  return cache;
}

bool all_full(const std::vector<Mask>& masks) {
  for (const Mask& mask : masks) {
    if (!mask.is_full()) return false;
  }
  return true;
}

// The lists a loop nest walks: every inner tile (all masks full) or the uploaded ones.
struct Walk {
  std::shared_ptr<const DeviceLists> lists;  // null when dense
  tile_math::TileListsRef ref;
};
Walk walk(const std::vector<Mask>& masks, FlashMasking masking, const FlashTiles& tiles, Pass pass,
          bool key_cols, int64_t outer_rows, int64_t outer_block, int64_t inner_rows,
          int64_t inner_block) {
  Walk w;
  if (masking == FlashMasking::block_sparse) {
    w.lists = list_cache().get(masks, tiles, pass, key_cols);
    w.ref = w.lists->ref;
    return w;
  }
  w.ref.dense = true;
  w.ref.num_outer = tile_math::num_tiles(outer_rows, outer_block);
  w.ref.num_inner = tile_math::num_tiles(inner_rows, inner_block);
  w.ref.inner_block = inner_block;
  return w;
}

FlashDims dims_of(const device::DeviceShape& s, float scale) {
  return {s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.head_dim, s.head_dim_v, scale};
}

// The tensor-core launchers exist for the 16-bit types only (flash_call never picks them for fp32).
template <typename T>
void launch_mma(const ForwardParams<T>& p, int dim, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) launch_mma_forward(p, dim, stream);
}
template <typename T>
void launch_mma(const DkdvParams<T>& p, int dim, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) launch_mma_dkdv(p, dim, stream);
}
template <typename T>
void launch_mma(const DqParams<T>& p, int dim, cudaStream_t stream) {
  if constexpr (!std::is_same_v<T, float>) launch_mma_dq(p, dim, stream);
}

}  // namespace

template <typename T>
DeviceRun flash_forward(const device::DeviceShape& shape, const ForwardViews<T>& views,
                        const std::vector<Mask>& masks, float scale, int64_t smem_words,
                        bool tensor_cores, cudaStream_t stream) {
  const FlashMasking masking = all_full(masks) ? FlashMasking::dense : FlashMasking::block_sparse;
  const device::FlashCall call =
      device::flash_call(shape, smem_words, Pass::forward, masking, element_type_of<T>(), tensor_cores);
  const FlashTiles& t = call.tiles;
  const Walk w = walk(masks, masking, t, Pass::forward, false, shape.seqlen_q, t.block_q,
                      shape.seqlen_k, t.block_k);
  ForwardParams<T> p;
  p.q = strided(views.q);
  p.k = strided(views.k);
  p.v = strided(views.v);
  p.o = strided(views.o);
  p.lse = strided(views.lse);
  p.dims = dims_of(shape, scale);
  p.block_q = t.block_q;
  p.block_k = t.block_k;
  p.lists = w.ref;
  if (call.mma_dim != 0) {
    p.layout.words = call.smem_words;
    launch_mma(p, call.mma_dim, stream);
  } else {
    p.layout = device::forward_layout(shape.head(), t, masking);
    launch_flash_forward(p, stream);
  }
  // The lists stay alive in the cache; a kernel in flight keeps reading them until the stream
  // is synchronized (release_device_caches() must not run concurrently with kernels).
  return device::flash_run(Pass::forward, call);
}

template <typename T>
DeviceRun flash_backward(const device::DeviceShape& shape, const BackwardViews<T>& views,
                         const std::vector<Mask>& masks, float scale, int64_t smem_words,
                         bool tensor_cores, cudaStream_t stream) {
  const FlashMasking masking = all_full(masks) ? FlashMasking::dense : FlashMasking::block_sparse;
  const device::FlashCall call =
      device::flash_call(shape, smem_words, Pass::backward, masking, element_type_of<T>(), tensor_cores);
  const FlashTiles& t = call.tiles;
  const FlashDims dims = dims_of(shape, scale);
  DeviceBuffer<float> delta(static_cast<size_t>(shape.batch * shape.heads * shape.seqlen_q));

  DeltaParams<T> dp;
  dp.o = strided(views.o);
  dp.d_o = strided(views.d_o);
  dp.delta = delta.data();
  dp.dims = dims;
  launch_flash_delta(dp, stream);

  const Walk cols = walk(masks, masking, t, Pass::backward, true, shape.seqlen_k, t.dkdv_block_k,
                         shape.seqlen_q, t.dkdv_block_q);
  DkdvParams<T> kp;
  kp.q = strided(views.q);
  kp.k = strided(views.k);
  kp.v = strided(views.v);
  kp.d_o = strided(views.d_o);
  kp.lse = strided(views.lse);
  kp.delta = delta.data();
  kp.dk = strided(views.dk);
  kp.dv = strided(views.dv);
  kp.dims = dims;
  kp.block_q = t.dkdv_block_q;
  kp.block_k = t.dkdv_block_k;
  kp.lists = cols.ref;
  if (call.mma_dim != 0) {
    kp.layout.words = call.smem_words;
    launch_mma(kp, call.mma_dim, stream);
  } else {
    kp.layout = device::dkdv_layout(shape.head(), t, masking);
    launch_flash_dkdv(kp, stream);
  }

  const Walk rows = walk(masks, masking, t, Pass::backward, false, shape.seqlen_q, t.block_q,
                         shape.seqlen_k, t.block_k);
  DqParams<T> qp;
  qp.q = kp.q;
  qp.k = kp.k;
  qp.v = kp.v;
  qp.d_o = kp.d_o;
  qp.lse = kp.lse;
  qp.delta = delta.data();
  qp.dq = strided(views.dq);
  qp.dims = dims;
  qp.block_q = t.block_q;
  qp.block_k = t.block_k;
  qp.lists = rows.ref;
  if (call.mma_dim != 0) {
    qp.layout.words = call.smem_words;
    launch_mma(qp, call.mma_dim, stream);
  } else {
    qp.layout = device::dq_layout(shape.head(), t, masking);
    launch_flash_dq(qp, stream);
  }
  // `delta` is freed on return: wait for the kernels that read it first.
  SPATTN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return device::flash_run(Pass::backward, call);
}

void release_flash_lists() {
  list_cache().clear();
#if !defined(SPATTN_FLASH_EMULATION)
  release_device_csrs();
#endif
}

#define SPATTN_FLASH_PATH(T)                                                                       \
  template DeviceRun flash_forward<T>(const device::DeviceShape&, const ForwardViews<T>&,         \
                                      const std::vector<Mask>&, float, int64_t, bool, cudaStream_t); \
  template DeviceRun flash_backward<T>(const device::DeviceShape&, const BackwardViews<T>&,          \
                                       const std::vector<Mask>&, float, int64_t, bool, cudaStream_t);
SPATTN_FLASH_PATH(float)
SPATTN_FLASH_PATH(half_t)
SPATTN_FLASH_PATH(bfloat16_t)
#undef SPATTN_FLASH_PATH

}  // namespace spattn::cuda::detail

namespace spattn::device {

FlatTileLists device_flash_lists(const std::vector<Mask>& masks, const FlashTiles& tiles, Pass pass,
                                 bool key_cols, ListsBuilder builder) {
  if (!cuda::device_available()) throw RuntimeError("device_flash_lists: " + cuda::device_status());
  const auto lists = cuda::detail::build_lists(masks, tiles, pass, key_cols, builder);
  const tile_math::TileListsRef& ref = lists->ref;
  FlatTileLists flat;
  flat.num_outer = ref.num_outer;
  flat.num_inner = ref.num_inner;
  flat.inner_block = ref.inner_block;
  flat.bit_words = ref.bit_words;
  flat.num_masks = ref.num_masks;
  const auto download = [](auto& host, const auto& buffer) {
    host.resize(buffer.size());
    if (!host.empty()) {
      SPATTN_CUDA_CHECK(cudaMemcpy(host.data(), buffer.data(), host.size() * sizeof(host[0]),
                                   cudaMemcpyDeviceToHost));
    }
  };
  download(flat.tile_ptr, lists->tile_ptr);
  download(flat.partial_ptr, lists->partial_ptr);
  download(flat.entries, lists->entries);
  download(flat.bits, lists->bits);
  return flat;
}

}  // namespace spattn::device
