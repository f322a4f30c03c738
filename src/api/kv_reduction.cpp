// Grouped-query attention's dK, dV sums over each group's query heads (kv_reduction.hpp).
#include "api/kv_reduction.hpp"

#include "api/head_views.hpp"
#include "cpu/workers.hpp"

#include <spattn/error.hpp>

#include <algorithm>
#include <utility>

namespace spattn::api_detail {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t tiles_of(const KvSum& sum, const detail::KvSumTile& tile) {
  return ceil_div(sum.dst.rows(), tile.rows) * ceil_div(sum.dst.cols(), tile.cols);
}

}  // namespace

template <typename T>
KvGradientSlots<T>::KvGradientSlots(const TensorView<T>& dk, const TensorView<T>& dv, int64_t heads, int64_t group)
    : dk_(dk), dv_(dv), group_(group),
      scratch_heads_(group == 1 ? 0 : kFirstInPlace ? heads - heads / group : heads) {
  const auto slots = static_cast<size_t>(dk.batch() * scratch_heads_);
  dk_scratch_.resize(slots * static_cast<size_t>(dk.seqlen() * dk.head_dim()));
  dv_scratch_.resize(slots * static_cast<size_t>(dv.seqlen() * dv.head_dim()));
}

template <typename T>
std::vector<KvSum> KvGradientSlots<T>::sums() {
  std::vector<KvSum> list;
  if (group_ == 1) return list;
  for (int64_t b = 0; b < dk_.batch(); ++b) {
    for (int64_t g = 0; g < dk_.heads(); ++g) {
      KvSum dk_sum{io::Operand::dk, head_matrix(dk_, b, g), {}};
      KvSum dv_sum{io::Operand::dv, head_matrix(dv_, b, g), {}};
      for (int64_t h = g * group_; h < (g + 1) * group_; ++h) {
        dk_sum.parts.push_back(dk(b, h));
        dv_sum.parts.push_back(dv(b, h));
      }
      list.push_back(std::move(dk_sum));
      list.push_back(std::move(dv_sum));
    }
  }
  return list;
}

template <typename T>
io::SlowMatrix<float> KvGradientSlots<T>::slot(const TensorView<T>& out, std::vector<float>& scratch, int64_t b,
                                               int64_t h) {
  if (in_place(h)) return head_matrix(out, b, h / group_);
  // Scratch heads in (batch, head) order, the in-place heads left out.
  const int64_t per_group = kFirstInPlace ? group_ - 1 : group_;
  const int64_t index = b * scratch_heads_ + (h / group_) * per_group + h % group_ - (kFirstInPlace ? 1 : 0);
  const int64_t size = out.seqlen() * out.head_dim();
  return io::SlowMatrix<float>::dense(scratch.data() + index * size, out.seqlen(), out.head_dim());
}

template class KvGradientSlots<float>;
template class KvGradientSlots<half_t>;
template class KvGradientSlots<bfloat16_t>;

void sum_kv_gradients(const std::vector<KvSum>& sums, const Plan& plan, int threads, io::Ledger* ledger) {
  const int64_t cache_words = plan.cache_words;
  const detail::PlannedRun& run = *plan.run;
  auto tile_of = [&](const KvSum& sum) { return sum.operand == io::Operand::dk ? run.dk_sum : run.dv_sum; };
  // Items: (sum, tile) pairs in order; each sum has its own tile grid (dK and dV differ in width).
  // The buffers hold the largest tile (not M / 2 words: M may be far larger than the gradients).
  std::vector<int64_t> first_item(sums.size() + 1, 0);
  int64_t buffer_words = 0;
  for (size_t s = 0; s < sums.size(); ++s) {
    const detail::KvSumTile tile = tile_of(sums[s]);
    if (tile.rows < 1 || tile.cols < 1) {
      fail("grouped-query dK/dV sum: the plan has no tile for ", io::operand_name(sums[s].operand));
    }
    first_item[s + 1] = first_item[s] + tiles_of(sums[s], tile);
    buffer_words = std::max(buffer_words, tile.rows * tile.cols);
  }
  const int64_t num_items = first_item.back();
  if (num_items == 0) return;
  const int workers = static_cast<int>(std::clamp<int64_t>(num_items, 1, std::max(threads, 1)));
  cpu::WorkerMemories memories(workers, cache_words, ledger, "grouped-query dK/dV sum");
  cpu::run_workers(workers, [&](int worker) {
    io::FastMemory& fast = memories[worker];
    auto total = fast.allocate<float>(buffer_words, "sum tile");
    auto part = fast.allocate<float>(buffer_words, "partial tile");
    size_t s = 0;
    cpu::for_each_item(worker, workers, num_items, [&](int64_t item) {
      while (first_item[s + 1] <= item) ++s;
      const KvSum& sum = sums[s];
      const int64_t rows = sum.dst.rows(), cols = sum.dst.cols();
      const detail::KvSumTile tile = tile_of(sum);
      const int64_t col_tiles = ceil_div(cols, tile.cols);
      const int64_t index = item - first_item[s];
      const int64_t r0 = (index / col_tiles) * tile.rows, c0 = (index % col_tiles) * tile.cols;
      const int64_t tile_rows = std::min(tile.rows, rows - r0), tile_cols = std::min(tile.cols, cols - c0);
      const int64_t count = tile_rows * tile_cols;
      fast.load(sum.operand, sum.parts.front(), r0, c0, tile_rows, tile_cols, total, 0, tile_cols);
      for (size_t p = 1; p < sum.parts.size(); ++p) {
        fast.load(sum.operand, sum.parts[p], r0, c0, tile_rows, tile_cols, part, 0, tile_cols);
        for (int64_t i = 0; i < count; ++i) total[i] += part[i];
      }
      fast.store(sum.operand, total, 0, tile_cols, sum.dst, r0, c0, tile_rows, tile_cols);
    });
  });
  memories.merge_ledgers();
}

}  // namespace spattn::api_detail
