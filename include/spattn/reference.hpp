// The fp64 reference: dense, materialized, obviously correct. Every other algorithm is compared
// to it, and it is checked against central finite differences once (tests/reference_*_test.cpp).
// Definitions and conventions: docs/reference.md and docs/theory.md section 2.
//
// Per head (b, h), with the kv head g = h / (heads / kv_heads) and the mask Omega of (b, h):
//
//   S_ij = scale * q_i . k_j          for (i, j) in Omega only
//   L_i  = logsumexp_j S_ij           (row max subtracted; -inf for an empty row)
//   P_ij = exp(S_ij - L_i)
//   O_i  = sum_j P_ij v_j             (0 for an empty row)
//
// Backward, given dO:
//
//   D_i   = dO_i . O_i
//   dP_ij = dO_i . v_j                on Omega only
//   dS_ij = P_ij (dP_ij - D_i)
//   dQ_i  = scale sum_j dS_ij k_j,  dK_j = scale sum_i dS_ij q_i,  dV_j = sum_i P_ij dO_i
//
// dK and dV of a kv head add up the contributions of every query head of its group. An empty row
// contributes nothing to any gradient; nothing is ever NaN for finite inputs.
//
// Index is int32_t or int64_t (both instantiated).
#pragma once

#include <spattn/tensor.hpp>

#include <sparse_formats/csr.hpp>

#include <cstdint>
#include <vector>

namespace spattn::reference {

// One mask (seqlen_q x seqlen_k pattern) per (batch, head) pair, given as
//   1 mask             shared by every batch and head,
//   heads masks        one per query head, shared over the batch (index h),
//   batch * heads      one per (b, h), index b * heads + h.
// (When several of these counts coincide they mean the same thing.) The stored entries of a mask
// are the pairs that attend; values do not exist. Masks are checked for shape and cheap structure
// (row_ptr present, starts at 0, never decreases; columns in range and strictly increasing).
template <typename Index>
using MaskList = std::vector<sparse_formats::CsrPatternView<Index>>;

struct ForwardResult {
  std::vector<double> o;    // (batch, heads, seqlen_q, head_dim_v), contiguous
  std::vector<double> lse;  // (batch, heads, seqlen_q), contiguous; -inf for an empty row
};

struct BackwardResult {
  std::vector<double> dq;  // q's shape (batch, heads, seqlen_q, head_dim), contiguous
  std::vector<double> dk;  // k's shape (batch, kv_heads, seqlen_k, head_dim), contiguous
  std::vector<double> dv;  // v's shape (batch, kv_heads, seqlen_k, head_dim_v), contiguous
};

// Shapes (any strides; views may alias nothing that is written, the results are new vectors):
//   q   (batch, heads,    seqlen_q, head_dim)
//   k   (batch, kv_heads, seqlen_k, head_dim)
//   v   (batch, kv_heads, seqlen_k, head_dim_v)
//   d_o (batch, heads,    seqlen_q, head_dim_v)
// heads must be a multiple of kv_heads (grouped-query attention; kv_heads == heads is ordinary
// multi-head attention). scale must be finite. Throws spattn::InvalidArgument naming the argument
// and the values ("reference::forward: k has head_dim 63, q has 64"); nothing is computed then.
template <typename Index>
ForwardResult forward(TensorView<const double> q, TensorView<const double> k,
                      TensorView<const double> v, const MaskList<Index>& masks, double scale);

// Recomputes the forward internally (it is a reference, not a fast path).
template <typename Index>
BackwardResult backward(TensorView<const double> q, TensorView<const double> k,
                        TensorView<const double> v, TensorView<const double> d_o,
                        const MaskList<Index>& masks, double scale);

// ---- Sparse inputs (docs/sparse.md, "Sparse inputs") -------------------------------------------
//
// q, k and v may be given as CSR: one (seqlen x head_dim) matrix per head, index b * heads + h
// (b * kv_heads + g for k and v). An entry that is not stored is zero; the result is exactly that
// of forward() / backward() on the densified tensors (the reference densifies them: it is the
// oracle, not a fast path). Outputs stay dense: the gradient with respect to a CSR input is
// returned as a dense tensor of its shape; its restriction to the stored pattern is the gradient
// of the stored values. Every matrix is checked (shape, structure, finite values): the message
// names it, "reference::forward: k[1]: col_idx[4] = 9 is out of range [0, 8) (row 2)".
template <typename Index>
struct CsrTensor {
  int64_t batch = 1;
  int64_t heads = 1;
  std::vector<sparse_formats::CsrMatrixView<Index, double>> matrices;  // batch * heads
};

template <typename Index>
ForwardResult forward(const CsrTensor<Index>& q, const CsrTensor<Index>& k,
                      const CsrTensor<Index>& v, const MaskList<Index>& masks, double scale);
template <typename Index>
BackwardResult backward(const CsrTensor<Index>& q, const CsrTensor<Index>& k,
                        const CsrTensor<Index>& v, TensorView<const double> d_o,
                        const MaskList<Index>& masks, double scale);

// ---- The paper's formulation (theory.md section 2; Alman and Song) -----------------------------
//
//   L(X) = 1/2 || D(X)^{-1} exp(scale * A1 X A2^T) A3 Y - E ||_F^2
//
// where exp acts on the mask's entries only (0 elsewhere) and D(X) = diag(exp(...) 1); an empty
// row of the mask gives a zero row of D^{-1} exp(...). The paper has scale = 1 and no mask (full).
// All matrices are dense row-major.
template <typename Index = sparse_formats::MaskIndex>
struct PaperProblem {
  int64_t n = 0;  // sequence length
  int64_t d = 0;  // head dimension
  const double* a1 = nullptr;  // (n, d)
  const double* a2 = nullptr;  // (n, d)
  const double* a3 = nullptr;  // (n, d)
  const double* e = nullptr;   // (n, d), the target
  const double* x = nullptr;   // (d, d), the variable
  const double* y = nullptr;   // (d, d)
  // n x n; nullptr means the full mask (every pair attends).
  const sparse_formats::CsrPatternView<Index>* mask = nullptr;
  double scale = 1.0;
};

// L(X), computed literally from the formula above (materializing the n x n matrices).
template <typename Index>
double paper_loss(const PaperProblem<Index>& problem);

// g = dL/dX, (d, d) row-major, computed in the paper's own form (Alman and Song):
//   g = scale * A1^T p(X) A2,  p = f ∘ q - diag(rowsum(f ∘ q)) f,
// with f = D^{-1} exp(A), q = (f A3 Y - E)(A3 Y)^T. This equals A1^T dQ of backward() run on
// Q = A1 X, K = A2, V = A3 Y, dO = O - E (see paper_reference.cpp for the derivation).
template <typename Index>
std::vector<double> paper_gradient(const PaperProblem<Index>& problem);

}  // namespace spattn::reference
