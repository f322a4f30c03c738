// The I/O lower bounds of theory.md section 3, as formulas in words (constant 1; the papers give
// no constants). All take the fast-memory size M in words.
//
//   dense forward  (Saha and Ye):     min{ n^2 d^2 / M,            n^2 d / sqrt(M) }
//   dense backward (Theorem 1.1):     min{ (n^2 d^2 + n d^3) / M,  (n^2 d + n d^2) / sqrt(M) }
//   sparse (forward and backward):    min{ Z_input^2 / M,          Z_input sqrt(Z_QK) / sqrt(M) }
//
// For rectangular attention n^2 reads seqlen_q * seqlen_k and n reads max(seqlen_q, seqlen_k).
// The dense branches cross at M = d^2, the sparse ones at M = Z_input^2 / Z_QK. The compulsory
// I/O (read every input word once, write every output word once) holds with constant 1.
#pragma once

#include <cstdint>
#include <string>

namespace spattn::bounds {

enum class Branch { large_cache, small_cache };
const char* branch_name(Branch branch);  // "large-cache (1/M)" / "small-cache (1/sqrt M)"

struct Bound {
  double large_cache = 0.0;  // the 1/M branch
  double small_cache = 0.0;  // the 1/sqrt(M) branch
  double value = 0.0;        // min of the two: the bound
  Branch branch = Branch::large_cache;  // which branch is the minimum
  double crossover_m = 0.0;  // the M at which the branches are equal
};

struct DenseShape {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;
  int64_t head_dim_v = 0;  // 0 means head_dim
};

// Saha-Ye forward bound.
Bound dense_forward(const DenseShape& shape, double cache_words);
// The paper's Theorem 1.1, backward.
Bound dense_backward(const DenseShape& shape, double cache_words);
// The sparse bound with the project's convention for z_input and z_qk (docs/sparse.md).
Bound sparse(double z_input, double z_qk, double cache_words);

// Read every input once, write every output once (forward: Q, K, V in, O and LSE out; backward:
// Q, K, V, O, LSE, dO in, dQ, dK, dV out).
double compulsory_forward(const DenseShape& shape);
double compulsory_backward(const DenseShape& shape);

// Hong-Kung / Smith: one (a x k) by (k x b) standard product moves at least 2 a k b / sqrt(M) - 2M
// words (clamped at 0), with constant 1.
double matmul_lower_bound(double a, double k, double b, double cache_words);

}  // namespace spattn::bounds
