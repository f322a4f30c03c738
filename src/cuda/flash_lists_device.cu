// The flash tile lists built on the device (flash_lists_device.hpp): the Thrust algorithm of
// src/device/thrust/flash_lists.inl on thrust::cuda::par, the same source the CPU tests run with
// Thrust's CPP system against build_flash_mask.
#include "cuda/flash_lists_device.hpp"

#include "device/thrust/flash_lists.inl"

#include <thrust/copy.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>

#include <map>
#include <mutex>
#include <utility>

namespace spattn::cuda::detail {
namespace {

using device::ListDirection;
using device::ListGeometry;

constexpr int64_t kInt32Max = 2147483647;

// A mask's element CSR on one device.
struct DeviceCsr {
  thrust::device_vector<int64_t> row_ptr, col_idx;
  Mask keep_alive;  // the cache key is the mask's address
};

// Uploaded once per (device, mask) and reused by every tiling and direction; bounded like the list
// cache (cleared when it holds kMaxEntries).
class CsrCache {
 public:
  static constexpr size_t kMaxEntries = 64;

  std::shared_ptr<const DeviceCsr> get(const Mask& mask) {
    int device = 0;
    SPATTN_CUDA_CHECK(cudaGetDevice(&device));
    const std::pair<int, const void*> key{device, &spattn::detail::cache_of(mask)};
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = entries_.find(key);
    if (found != entries_.end()) return found->second;
    if (entries_.size() >= kMaxEntries) entries_.clear();
    const sparse_formats::CsrPatternView<int64_t> csr = mask.csr();
    auto uploaded = std::make_shared<DeviceCsr>(DeviceCsr{{}, {}, mask});
    uploaded->row_ptr.assign(csr.row_ptr, csr.row_ptr + csr.num_rows + 1);
    uploaded->col_idx.assign(csr.col_idx, csr.col_idx + csr.nnz());
    entries_.emplace(key, uploaded);
    return uploaded;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<int, const void*>, std::shared_ptr<const DeviceCsr>> entries_;
};

CsrCache& csr_cache() {
  static CsrCache cache;
  return cache;
}

// One mask's lists as the algorithm leaves them (64-bit, offsets local to the mask).
struct Lists64 {
  thrust::device_vector<int64_t> tile_ptr, partial_ptr, entries;
  thrust::device_vector<uint64_t> bits;
};

// value + base, narrowed: the totals were checked against int32 first.
struct Narrow {
  int64_t base;
  __host__ __device__ int32_t operator()(int64_t value) const {
    return static_cast<int32_t>(value + base);
  }
};

}  // namespace

std::shared_ptr<const DeviceLists> build_lists_on_device(const std::vector<Mask>& masks,
                                                         const schedules::FlashTiles& tiles,
                                                         bool key_cols) {
  if (masks.empty()) fail("build_lists_on_device: no masks");
  const int64_t n_q = masks.front().seqlen_q(), n_k = masks.front().seqlen_k();
  const ListGeometry g =
      key_cols ? device::list_geometry(n_q, n_k, tiles.dkdv_block_k, tiles.dkdv_block_q,
                                       ListDirection::key_cols)
               : device::list_geometry(n_q, n_k, tiles.block_q, tiles.block_k,
                                       ListDirection::query_rows);
  const auto exec = thrust::cuda::par;  // the default stream; every call returns when it is done
  std::vector<Lists64> built(masks.size());
  int64_t entries = 0, partials = 0;
  for (size_t m = 0; m < masks.size(); ++m) {
    if (masks[m].seqlen_q() != n_q || masks[m].seqlen_k() != n_k) {
      fail("build_lists_on_device: mask ", m, " is ", masks[m].seqlen_q(), " x ",
           masks[m].seqlen_k(), ", mask 0 is ", n_q, " x ", n_k);
    }
    const std::shared_ptr<const DeviceCsr> csr = csr_cache().get(masks[m]);
    Lists64& l = built[m];
    device::build_tile_lists(exec, thrust::raw_pointer_cast(csr->row_ptr.data()),
                             thrust::raw_pointer_cast(csr->col_idx.data()),
                             static_cast<int64_t>(csr->col_idx.size()), g, l.tile_ptr,
                             l.partial_ptr, l.entries, l.bits);
    entries += static_cast<int64_t>(l.entries.size());
    partials += static_cast<int64_t>(l.bits.size()) / g.bit_words;
  }
  if (entries > kInt32Max || partials > kInt32Max) {
    fail("cuda flash: ", entries, " stored tiles (", partials,
         " partial) exceed the device lists' 32-bit indices");
  }

  // Flattened as device::flatten_tile_lists does: mask m's lists at m (T + 1), global offsets.
  auto out = std::make_shared<DeviceLists>();
  const auto num_lists = static_cast<size_t>(masks.size() * (g.num_outer + 1));
  out->tile_ptr = DeviceBuffer<int32_t>(num_lists);
  out->partial_ptr = DeviceBuffer<int32_t>(num_lists);
  out->entries = DeviceBuffer<int32_t>(static_cast<size_t>(entries));
  out->bits = DeviceBuffer<uint64_t>(static_cast<size_t>(partials * g.bit_words));
  int64_t entry_base = 0, partial_base = 0;
  for (size_t m = 0; m < masks.size(); ++m) {
    const Lists64& l = built[m];
    const auto list_offset = static_cast<int64_t>(m) * (g.num_outer + 1);
    thrust::transform(exec, l.tile_ptr.begin(), l.tile_ptr.end(),
                      thrust::device_pointer_cast(out->tile_ptr.data() + list_offset),
                      Narrow{entry_base});
    thrust::transform(exec, l.partial_ptr.begin(), l.partial_ptr.end(),
                      thrust::device_pointer_cast(out->partial_ptr.data() + list_offset),
                      Narrow{partial_base});
    thrust::transform(exec, l.entries.begin(), l.entries.end(),
                      thrust::device_pointer_cast(out->entries.data() + entry_base), Narrow{0});
    thrust::copy(exec, l.bits.begin(), l.bits.end(),
                 thrust::device_pointer_cast(out->bits.data() + partial_base * g.bit_words));
    entry_base += static_cast<int64_t>(l.entries.size());
    partial_base += static_cast<int64_t>(l.bits.size()) / g.bit_words;
  }
  tile_math::TileListsRef& ref = out->ref;
  ref.tile_ptr = out->tile_ptr.data();
  ref.partial_ptr = out->partial_ptr.data();
  ref.entries = out->entries.data();
  ref.bits = out->bits.data();
  ref.num_outer = g.num_outer;
  ref.num_inner = g.num_inner;
  ref.inner_block = g.inner_block;
  ref.bit_words = g.bit_words;
  ref.num_masks = static_cast<int64_t>(masks.size());
  ref.dense = false;
  out->keep_alive = masks;
  return out;
}

void release_device_csrs() { csr_cache().clear(); }

}  // namespace spattn::cuda::detail
