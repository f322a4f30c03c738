// The Thrust tile-list algorithm (flash_lists.inl) instantiated for the host: compiled as C++ with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CPP (src/CMakeLists.txt, target spattn_thrust_host),
// so thrust::device_vector is host memory and every algorithm runs sequentially on the CPU. It is
// the same source the device runs; the CPU tests compare its result with build_flash_mask.
#include "device/thrust/flash_lists.inl"

#include <thrust/copy.h>
#include <thrust/system/cpp/execution_policy.h>

#include <string>

namespace spattn::device {
namespace {

template <typename To, typename From>
std::vector<To> to_std(const thr::device_vector<From>& v) {
  std::vector<From> wide(v.size());
  thr::copy(v.begin(), v.end(), wide.begin());
  return std::vector<To>(wide.begin(), wide.end());
}

}  // namespace

FlatTileLists build_tile_lists_thrust_host(
    const sparse_formats::CsrPatternView<int64_t>& mask, int64_t seqlen_q, int64_t seqlen_k,
    int64_t outer_block, int64_t inner_block, ListDirection direction) {
  if (mask.num_rows != seqlen_q || mask.num_cols != seqlen_k) {
    fail("build_tile_lists_thrust_host: mask is ", mask.num_rows, " x ", mask.num_cols,
         ", expected ", seqlen_q, " x ", seqlen_k, " (seqlen_q x seqlen_k)");
  }
  const ListGeometry g = list_geometry(seqlen_q, seqlen_k, outer_block, inner_block, direction);
  thr::device_vector<int64_t> tile_ptr, partial_ptr, entries;
  thr::device_vector<uint64_t> bits;
  // An empty view may come with row_ptr == nullptr (nnz() is then 0): the algorithm reads
  // row_ptr only to place pairs, and there are none.
  const int64_t zero = 0;
  const int64_t* row_ptr = mask.row_ptr != nullptr ? mask.row_ptr : &zero;
  build_tile_lists(thr::cpp::par, row_ptr, mask.col_idx, mask.nnz(), g, tile_ptr, partial_ptr,
                   entries, bits);
  FlatTileLists lists;
  lists.num_outer = g.num_outer;
  lists.num_inner = g.num_inner;
  lists.inner_block = g.inner_block;
  lists.bit_words = g.bit_words;
  lists.num_masks = 1;
  lists.tile_ptr = to_std<int32_t>(tile_ptr);
  lists.partial_ptr = to_std<int32_t>(partial_ptr);
  lists.entries = to_std<int32_t>(entries);
  lists.bits = to_std<uint64_t>(bits);
  return lists;
}

}  // namespace spattn::device
