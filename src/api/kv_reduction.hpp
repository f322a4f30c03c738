// Grouped-query attention's dK and dV: a kv head's gradient is the sum over the query heads of
// its group. The backward schedules compute one query head's dK, dV each (KvGradientSlots: into
// the caller's dk / dv or slow-memory scratch); this adds them up, in
// the group's head order, through fast memory, so the words are counted and predicted like every
// other move (plan/planner.hpp, add_kv_sums, predicts them):
//
//   per kv head and gradient of width w (d for dK, e for dV):
//     reads  group * seqlen_k * w     every head's partial
//     writes seqlen_k * w             the sum
//
// Tiles of rows x cols (the plan's: two buffers, the sum and one partial, 2 rows cols <= M) are split over a
// team of workers, each tile summed by one worker in the fixed head order: the bits are the same
// for any number of workers.
#pragma once

#include "plan/planned_run.hpp"

#include <spattn/io.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <type_traits>
#include <vector>

namespace spattn::api_detail {

// dst = parts[0] + parts[1] + ..., all of dst's shape, added in that order; parts[0] may be dst
// itself (read, then overwritten).
struct KvSum {
  io::Operand operand = io::Operand::dk;  // what the words are booked as
  io::SlowMatrix<float> dst;
  std::vector<io::SlowMatrix<float>> parts;  // the query heads' partial sums, in head order
};

// Where the backward's per-query-head dK, dV go. Float gradients: the first query head of each
// kv group writes the caller's dk / dv, the others slow-memory scratch owned here
// ((heads - kv_heads) x batch x seqlen_k x (d + d_v) floats). 16-bit gradients: every head of a
// group writes float scratch (heads x batch x ...), so the partial sums are rounded once, when
// their sum is stored. Multi-head attention (group == 1) writes the caller's arrays directly.
template <typename T>
class KvGradientSlots {
 public:
  KvGradientSlots(const TensorView<T>& dk, const TensorView<T>& dv, int64_t heads, int64_t group);
  io::SlowMatrix<float> dk(int64_t b, int64_t h) { return slot(dk_, dk_scratch_, b, h); }
  io::SlowMatrix<float> dv(int64_t b, int64_t h) { return slot(dv_, dv_scratch_, b, h); }
  // The sums giving dK and dV of every (batch, kv head), parts in query-head order; empty when
  // group == 1.
  std::vector<KvSum> sums();

 private:
  // Whether head h's partial lies in the caller's array (float, the group's first head).
  bool in_place(int64_t h) const { return group_ == 1 || (kFirstInPlace && h % group_ == 0); }
  io::SlowMatrix<float> slot(const TensorView<T>& out, std::vector<float>& scratch, int64_t b, int64_t h);

  static constexpr bool kFirstInPlace = std::is_same_v<T, float>;
  TensorView<T> dk_, dv_;
  int64_t group_;
  int64_t scratch_heads_;  // query heads per batch entry that write scratch
  std::vector<float> dk_scratch_, dv_scratch_;
};

// Runs the sums with the plan's tiles (run->dk_sum, dv_sum, chosen by the planner) on `threads`
// workers with fast memories of plan.cache_words words, counting into `ledger` when set.
void sum_kv_gradients(const std::vector<KvSum>& sums, const Plan& plan, int threads, io::Ledger* ledger);

}  // namespace spattn::api_detail
