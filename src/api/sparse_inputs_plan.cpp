// The plan with dense or CSR inputs (sparse_inputs.hpp): the dense-input plan of plan.hpp for
// feasibility and tiles, then, once an input is CSR, each algorithm's exact words with these
// inputs (schedules/input_traffic.hpp), the choice between them, and the sparse bound with
// Z_input from the nonzeros.
#include <spattn/sparse_inputs.hpp>

#include "api/mask_cache.hpp"
#include "api/sparse_inputs_detail.hpp"
#include "schedules/flash.hpp"
#include "schedules/flash_mask.hpp"
#include "schedules/input_traffic.hpp"
#include "schedules/small_cache.hpp"
#include "schedules/sparse_small_cache.hpp"

#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

namespace spattn {
namespace {

using schedules::HeadInputs;
using schedules::HeadShape;
using schedules::SparseIo;

// The tiles and structures each algorithm runs with (as api/head_runner.cpp chooses them), and
// its exact words with these inputs.
SparseIo flash_words(const HeadShape& head, const Mask& mask, int64_t cache_words, Pass pass,
                     const HeadInputs& inputs) {
  const bool sparse = !mask.is_full();
  const auto tiles = schedules::flash_tiles(
      head, cache_words, pass, sparse ? schedules::FlashMasking::block_sparse : schedules::FlashMasking::dense);
  const auto flash_mask = sparse ? mask.cache().flash(mask, tiles, pass) : nullptr;
  return schedules::predict_flash_words(head, tiles, flash_mask.get(), pass, inputs);
}

SparseIo small_cache_words(const HeadShape& head, const Mask& mask, int64_t cache_words, Pass pass,
                           const HeadInputs& inputs) {
  if (mask.is_full()) {
    return schedules::predict_small_cache_words(head, schedules::small_cache_tiles(head, cache_words, pass),
                                                inputs);
  }
  const auto tiles = schedules::sparse_small_cache_tiles(head, *mask.cache().small_cache_counts(mask),
                                                         cache_words, pass);
  return schedules::predict_sparse_small_cache_words(head, *mask.cache().small_cache(mask), tiles, inputs);
}

void set_words(AlgorithmCost& cost, const SparseIo& words) {
  cost.reads = words.total().reads;
  cost.writes = words.total().writes;
  cost.index_words = words.indices.total();
}

// Every input read once (a full-width read of a CSR input: its nonzeros and index words) and every
// output written once.
double compulsory(const bounds::DenseShape& shape, Pass pass, const HeadInputs& inputs) {
  const double dense = pass == Pass::forward ? bounds::compulsory_forward(shape) : bounds::compulsory_backward(shape);
  double words = dense;
  for (const schedules::InputOperand* op : {&inputs.q, &inputs.k, &inputs.v}) {
    const auto read = op->tile(0, op->rows(), 0, op->cols());
    words += static_cast<double>(read.values + read.indices) - static_cast<double>(op->rows() * op->cols());
  }
  return words;
}

}  // namespace

Plan plan_attention(const AttentionInputs& inputs, const Mask& mask, int64_t cache_words, Pass pass,
                    Algorithm requested) {
  const char* where = "plan (sparse inputs)";
  const bounds::DenseShape shape = sparse_inputs_detail::check_inputs(where, inputs);
  Plan plan = plan_attention(shape, mask, cache_words, pass, requested);  // checks M, mask, feasibility
  if (!inputs.any_csr()) return plan;

  const HeadShape head{shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.head_dim_v};
  const HeadInputs in = sparse_inputs_detail::head_inputs(inputs);
  if (plan.flash.feasible) set_words(plan.flash, flash_words(head, mask, cache_words, pass, in));
  if (plan.small_cache.feasible) set_words(plan.small_cache, small_cache_words(head, mask, cache_words, pass, in));
  if (requested == Algorithm::automatic) {
    const bool flash_wins = plan.flash.feasible &&
                            (!plan.small_cache.feasible || plan.flash.total() <= plan.small_cache.total());
    plan.algorithm = flash_wins ? Algorithm::flash : Algorithm::small_cache;
  }
  const AlgorithmCost& chosen = plan.algorithm == Algorithm::flash ? plan.flash : plan.small_cache;
  plan.reads = chosen.reads;
  plan.writes = chosen.writes;

  // The sparse bound, whatever the mask: Z_input from the nonzeros, Z_QK the attended pairs.
  plan.masked = true;
  plan.z_qk = mask.nnz();
  plan.z_input = inputs.z_input();
  plan.bound = bounds::sparse(plan.z_input, static_cast<double>(plan.z_qk), static_cast<double>(cache_words));
  plan.theoretical_switch = plan.bound.crossover_m;
  plan.compulsory = compulsory(plan.shape, pass, in);
  const double total = static_cast<double>(plan.total());
  plan.ratio_to_bound = plan.bound.value > 0.0 ? total / plan.bound.value : 0.0;
  plan.ratio_to_flash =
      plan.flash.feasible && plan.flash.total() > 0 ? total / static_cast<double>(plan.flash.total()) : 0.0;
  plan.beats_worst_case = plan.ratio_to_bound < 1.0;
  plan.switch_cache_words = 0;
  plan.switch_searched = false;
  plan.sparse_inputs = true;
  return plan;
}

}  // namespace spattn
