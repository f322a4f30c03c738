// Attention with sparse inputs: Q, K and V of one head, each dense or CSR (an element-sparse
// seqlen x head_dim matrix), run by the same schedules as dense inputs (docs/sparse.md, "Sparse
// inputs").
//
//   spattn::AttentionInputs in{spattn::AttentionInput::csr(q_csr), spattn::AttentionInput::csr(k_csr),
//                              spattn::AttentionInput::dense(v_matrix)};
//   spattn::Plan plan = spattn::attention_forward(in, o, lse, mask, options);  // {}: no mask
//
// A CSR input lives in slow memory as CSR: every tile a schedule loads from it is scattered into
// the dense fast buffer (zeros where nothing is stored), so the arithmetic, and therefore every
// output bit, is that of the densified input. The ledger books the nonzeros moved as the operand's
// value words and the CSR index words moved (row pointers, column indices, search probes) as its
// index words (io.hpp, "CSR inputs"); the plan predicts both exactly. Outputs stay dense: O, LSE,
// and dQ, dK, dV with the inputs' shapes; the gradient with respect to a CSR input is returned
// dense, and its restriction to the stored pattern is the gradient of the stored values.
//
// The bound uses the inputs' nonzeros: Z_input = (nnz(Q) + nnz(K)) / 2 and Z_QK = the mask's
// attended pairs (seqlen_q x seqlen_k for the full mask), with the sparse bound of bounds.hpp for
// every mask once an input is CSR (dense inputs keep attention.hpp's plans).
//
// Many heads per call (MultiHeadInputs): one input per (batch, query head) for Q and per
// (batch, kv head) for K and V, each dense or CSR, every head of the same shape; grouped-query attention when
// kv_heads divides heads (query head h uses kv head h / (heads / kv_heads)). The outputs are rank-4
// (batch, heads, seqlen, dim) tensors, dK and dV (batch, kv_heads, seqlen_k, dim), the group's sum
// in the backward (api/kv_reduction.hpp). The mask argument is attention.hpp's (HeadMasks: none, one
// for all heads, or one per query head, shared over the batch); all heads run one
// algorithm (under auto, the one with the fewer words summed over the heads). The heads' nonzeros
// and masks differ, so their words do: the plan sums every head's (Plan::cost_heads = num_heads =
// batch x heads), and its z_input, z_qk, bound and compulsory words are the heads' sums. One head's
// AttentionInputs convert to MultiHeadInputs (batch = heads = kv_heads = 1), with rank-2 outputs.
#pragma once

#include <spattn/attention.hpp>
#include <spattn/inputs.hpp>
#include <spattn/mask.hpp>
#include <spattn/plan.hpp>
#include <spattn/tensor.hpp>

#include <cstdint>
#include <vector>

namespace spattn {

// The plan attention_forward (pass forward) or attention_backward (pass backward) runs on these
// inputs with these masks and options, equal (operator==) to the plan the call returns: both
// algorithms' exact predictions with these inputs, the choice (for words), and the sparse bound
// with Z_input from the nonzeros. Validates as the call does: the counts (q: batch x heads
// inputs, k and v: batch x kv_heads), each input (shapes agree; CSR structure and values:
// InvalidArgument naming "q", "k" or "v", with the index when there are several heads), that all
// heads share one shape, the masks ("mask is 5 x 5, but q has seqlen 7 and k has seqlen 7",
// "masks has 2 masks, q has 3 heads") and the options (M = 0 is default_cache_words(),
// line_words = 0 the ledger's or 16). Reads no tensor; the switch M is not searched
// (Plan::switch_searched is false).
Plan plan_attention(const MultiHeadInputs& inputs, const HeadMasks& masks, Pass pass,
                    const AttentionOptions& options = {});

// o: (batch, heads, seqlen_q, head_dim_v); lse: (batch, heads, seqlen_q, 1) (rank-2 views for one head).
Plan attention_forward(const MultiHeadInputs& inputs, TensorView<float> o, TensorView<float> lse,
                       const HeadMasks& masks = {}, const AttentionOptions& options = {});

// o, lse, d_o, dq: (batch, heads, seqlen_q, .); dk, dv: (batch, kv_heads, seqlen_k, .); dense, dq,
// dk and dv with the shapes of q, k and v. o and lse are the forward's outputs.
Plan attention_backward(const MultiHeadInputs& inputs, TensorView<const float> o, TensorView<const float> lse,
                        TensorView<const float> d_o, TensorView<float> dq, TensorView<float> dk,
                        TensorView<float> dv, const HeadMasks& masks = {}, const AttentionOptions& options = {});

}  // namespace spattn
