// Attention forward and backward on float32, float16 or bfloat16 tensors, run by a schedule of
// the I/O model.
//
//   spattn::AttentionOptions options;
//   options.cache_words = 16384;              // M; 0 = default_cache_words() (4 x L1d, <= L2 / 2)
//   spattn::io::Ledger ledger;                // optional: count every word moved
//   options.ledger = &ledger;
//   auto plan = spattn::attention_forward(q, k, v, o, lse, causal, options);  // {}: no mask
//
// Tensors are strided views of (batch, heads, seqlen, head_dim) (rank-2 arrays as batch = heads =
// 1). k and v have kv_heads heads, and heads must be a multiple of kv_heads: grouped-query
// attention, query head h reading kv head h / (heads / kv_heads) (kv_heads == heads is ordinary
// multi-head attention). Every algorithm runs it; the backward adds each kv head's dK, dV up over
// its query heads in a fixed order (deterministic, counted, and included in the returned plan).
// The mask argument (HeadMasks, spattn/mask.hpp) is none (`{}`: every pair attended), one Mask
// shared by all heads, or a std::vector<Mask> with one per query head (shared over the batch).
// With any mask other than full, flash is the block-sparse flash schedule and small_cache the
// density-adaptive one (docs/block_sparse.md, docs/sparse_small_cache.md); all heads run the same
// algorithm.
// Element types: q, k, v, o, d_o and the gradients are all float, all half_t or all bfloat16_t
// (spattn/elements.hpp; one type per call, so mixing them does not compile); lse is float for
// every type. A 16-bit call converts each tile to float as it loads it and rounds each result to
// nearest even as it stores it: products and the softmax run in float, and every output is
// rounded once (docs/api.md, "Element types"). What each schedule keeps in float: its fast
// buffers, LSE, the backward's D and small_cache's materialized S, P, dP, dS.
// Validation happens here, once, before any output is written; messages name the argument and
// the values ("attention_backward: d_o has seqlen 63, q has 64").
#pragma once

#include <spattn/elements.hpp>
#include <spattn/io.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace spattn {

// The most worker threads a call takes (AttentionOptions::threads, and `threads` in Python).
inline constexpr int kMaxThreads = 4096;

struct AttentionOptions {
  Algorithm algorithm = Algorithm::automatic;
  std::optional<double> scale;   // default 1 / sqrt(head_dim)
  int64_t cache_words = 0;       // fast-memory size M in words; 0 = default_cache_words()
  io::Ledger* ledger = nullptr;  // when set, every word moved is counted into it
  // Worker threads, 0 to kMaxThreads; 0 = std::thread::hardware_concurrency() (the PyTorch op: 0 =
  // torch's intra-op thread count). Each worker has its own fast memory
  // of cache_words words (the model: M per core) and, when counting, its own ledger, merged into
  // `ledger` at the end. Results are bit-identical for every thread count (each output tile is
  // computed by one worker, in a fixed order of operations). flash splits every head's tiles over
  // the workers; small_cache runs one head per worker, or, with fewer heads than threads, splits
  // each head's row blocks over all of them. The workers past the first run on threads the
  // process keeps between calls (started on first use, asleep between calls; a call that finds
  // them busy, from another thread or inside a worker, starts threads of its own). The input
  // scan for NaN and infinity is split over them too when the inputs are large.
  int threads = 0;
  // What the plan minimizes over a mask (spattn/plan.hpp): time (the default: block-sparse
  // flash's and the density-adaptive small_cache's tiles and auto's choice priced for native
  // speed) or words (the fewest words, the I/O study's choice). The plan returned, and a ledger
  // when counting, follow it exactly either way. CSR (sparse-input) calls always plan for words.
  PlanObjective objective = PlanObjective::time;
  // The line size L of the I/O model, in words (spattn/io.hpp): the planner's tiles, auto's choice,
  // the switch search and every prediction are made for lines of L words. 1 is the paper's word
  // model (one word moves at a time); 16 is a 64-byte line of fp32, 32 one of fp16 / bf16. A word
  // is one element of what the call stores, and every array of a call is counted in lines of L
  // of its words (a 16-bit call's float arrays, LSE and the schedules' float scratch, too). A
  // power of two from 1 to io::kMaxLineWords; 0 = the ledger's line size when `ledger` is set,
  // else a 64-byte line of the call's elements (io::line_words_of: 16 fp32, 32 fp16 / bf16).
  // A ledger counting lines of another size is refused (its counts would not be the plan's).
  int64_t line_words = 0;
};

// The shapes of one call, for a preview: q is (batch, heads, seqlen_q, head_dim), k
// (batch, kv_heads, seqlen_k, head_dim), v (batch, kv_heads, seqlen_k, head_dim_v).
struct AttentionShape {
  int64_t batch = 1;
  int64_t heads = 1;
  int64_t kv_heads = 1;  // heads must be a multiple of it
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;  // 0: head_dim
  ElementType element = ElementType::fp32;  // of q, k, v: picks the default line size
};

// The plan attention_forward (pass forward) or attention_backward (pass backward) runs for tensors
// of `shape` with the same masks and options: equal (operator==) to the plan the call returns,
// tiles and prepared mask structures included. Validates the shape, the masks and M as the call
// does (messages name plan_attention); reads no tensor and runs nothing. options.ledger, threads
// and scale do not change a plan.
Plan plan_attention(const AttentionShape& shape, const HeadMasks& masks, Pass pass,
                    const AttentionOptions& options = {});

// The fast-memory size used when none is given: four times this machine's per-core L1 data
// cache, at most half the per-core L2, in fp32 words (sizes from sysconf, else /sys); 49152 words
// when the L1d is unknown. 49152 on a core with a 48 KiB L1d and a 2 MiB L2. Why 4 x L1d rather
// than the L1d: src/api/cache_size.cpp and docs/io_model.md.
int64_t default_cache_words();

// o: (batch, heads, seqlen_q, head_dim_v); lse: (batch, heads, seqlen_q, 1).
// One mask per query head: masks.size() == heads, each seqlen_q x seqlen_k. Heads given the same
// Mask (copies share it) are planned and run together; the plan's per-head costs are then summed
// over the heads of one batch entry (Plan::cost_heads).
// Returns the plan that ran, as plan_attention previews it (for Algorithm::reference, a plan of the
// automatic choice, for reporting only).
Plan attention_forward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
                       TensorView<float> o, TensorView<float> lse, const HeadMasks& masks = {},
                       const AttentionOptions& options = {});
Plan attention_forward(TensorView<const half_t> q, TensorView<const half_t> k, TensorView<const half_t> v,
                       TensorView<half_t> o, TensorView<float> lse, const HeadMasks& masks = {},
                       const AttentionOptions& options = {});
Plan attention_forward(TensorView<const bfloat16_t> q, TensorView<const bfloat16_t> k,
                       TensorView<const bfloat16_t> v, TensorView<bfloat16_t> o, TensorView<float> lse,
                       const HeadMasks& masks = {}, const AttentionOptions& options = {});

// dq, dk, dv take the shapes of q, k, v. o and lse are the forward's outputs.
Plan attention_backward(TensorView<const float> q, TensorView<const float> k, TensorView<const float> v,
                        TensorView<const float> o, TensorView<const float> lse, TensorView<const float> d_o,
                        TensorView<float> dq, TensorView<float> dk, TensorView<float> dv,
                        const HeadMasks& masks = {}, const AttentionOptions& options = {});
Plan attention_backward(TensorView<const half_t> q, TensorView<const half_t> k, TensorView<const half_t> v,
                        TensorView<const half_t> o, TensorView<const float> lse, TensorView<const half_t> d_o,
                        TensorView<half_t> dq, TensorView<half_t> dk, TensorView<half_t> dv,
                        const HeadMasks& masks = {}, const AttentionOptions& options = {});
Plan attention_backward(TensorView<const bfloat16_t> q, TensorView<const bfloat16_t> k,
                        TensorView<const bfloat16_t> v, TensorView<const bfloat16_t> o, TensorView<const float> lse,
                        TensorView<const bfloat16_t> d_o, TensorView<bfloat16_t> dq, TensorView<bfloat16_t> dk,
                        TensorView<bfloat16_t> dv, const HeadMasks& masks = {}, const AttentionOptions& options = {});

}  // namespace spattn
