// One attention head's operands in slow memory, as the schedules take them. The driver (the public
// API, the CLI, tests) slices batch x heads tensors into these; schedules never see the batch.
#pragma once

#include <spattn/io.hpp>
#include <spattn/types.hpp>  // Pass, pass_name

#include <cstdint>
#include <iosfwd>

namespace spattn::schedules {

using io::SlowMatrix;
using spattn::Pass;
using spattn::pass_name;

struct HeadShape {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;    // d of Q and K
  int64_t head_dim_v = 0;  // d of V and O (usually == head_dim)
  friend bool operator==(const HeadShape& a, const HeadShape& b) {
    return a.seqlen_q == b.seqlen_q && a.seqlen_k == b.seqlen_k && a.head_dim == b.head_dim &&
           a.head_dim_v == b.head_dim_v;
  }
};
// "seqlen_q x seqlen_k, head_dim d, head_dim_v e" (the tile records print with it; tests show it).
std::ostream& operator<<(std::ostream& out, const HeadShape& shape);

// Forward: O = softmax(scale * Q K^T) V and LSE, row by row.
struct HeadForward {
  SlowMatrix<const float> q;  // (seqlen_q, head_dim)
  SlowMatrix<const float> k;  // (seqlen_k, head_dim)
  SlowMatrix<const float> v;  // (seqlen_k, head_dim_v)
  SlowMatrix<float> o;        // (seqlen_q, head_dim_v)
  SlowMatrix<float> lse;      // (seqlen_q, 1); -inf for a row that attends nothing
  float scale = 1.0f;
};

// Backward: dQ, dK, dV from Q, K, V, O, LSE and dO. `delta` is slow-memory scratch for
// D = rowsum(dO ∘ O), written and read by the schedule (and counted).
struct HeadBackward {
  SlowMatrix<const float> q;    // (seqlen_q, head_dim)
  SlowMatrix<const float> k;    // (seqlen_k, head_dim)
  SlowMatrix<const float> v;    // (seqlen_k, head_dim_v)
  SlowMatrix<const float> o;    // (seqlen_q, head_dim_v)
  SlowMatrix<const float> lse;  // (seqlen_q, 1)
  SlowMatrix<const float> d_o;  // (seqlen_q, head_dim_v)
  SlowMatrix<float> delta;      // (seqlen_q, 1) scratch
  SlowMatrix<float> dq;         // (seqlen_q, head_dim)
  SlowMatrix<float> dk;         // (seqlen_k, head_dim)
  SlowMatrix<float> dv;         // (seqlen_k, head_dim_v)
  float scale = 1.0f;
};

// A predicted or counted number of words moved.
struct IoCount {
  int64_t reads = 0;
  int64_t writes = 0;
  int64_t total() const { return reads + writes; }
  IoCount& operator+=(const IoCount& other) {
    reads += other.reads;
    writes += other.writes;
    return *this;
  }
  friend IoCount operator+(IoCount a, const IoCount& b) { return a += b; }
  friend bool operator==(const IoCount& a, const IoCount& b) {
    return a.reads == b.reads && a.writes == b.writes;
  }
};

}  // namespace spattn::schedules
