// The flash kernels on one partial tile (flash_kernels.hpp, flash_kernels_ranges.hpp): the three
// steps skip the blocks of a tile whose rows attend nothing, and this checks each step of every
// instruction set this CPU supports against an fp64 computation of the same tile, over bit
// patterns that put the skipped parts where the code could go wrong: a band edge crossing the
// tile on a slant, only the last outer row attending (the shifted last chunk of lanes), an empty
// block of inner rows, an empty tile, every bit set, and inner tiles wider than one word of bits
// (72 rows: no skipping). The scratch tile starts as NaN, so an entry that is neither computed
// nor filled as masked shows up in the outputs.
#include "cpu/kernels/flash_kernels.hpp"
#include "support/compare.hpp"
#include "support/kernel_isas.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace kernels = spattn::schedules::flash_kernels;
using kernels::KernelIsa;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

std::vector<float> random_values(int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(count));
  for (float& value : values) value = uniform(rng);
  return values;
}

// (rows, cols) row-major -> (cols, rows) row-major.
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  }
  return t;
}

// Which (outer row, inner row) pairs attend.
using Pattern = std::function<bool(int64_t outer, int64_t inner)>;

// A partial tile's bits: pair (o, i) at bit o * rows_inner + i (bit_stride = the inner rows).
std::vector<uint64_t> tile_bits(int64_t rows_outer, int64_t rows_inner, const Pattern& attends) {
  std::vector<uint64_t> bits(static_cast<size_t>((rows_outer * rows_inner + 63) / 64 + 1), 0);
  for (int64_t o = 0; o < rows_outer; ++o) {
    for (int64_t i = 0; i < rows_inner; ++i) {
      const int64_t bit = o * rows_inner + i;
      if (attends(o, i)) bits[static_cast<size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
    }
  }
  return bits;
}

double dot(const std::vector<float>& a, int64_t row_a, const std::vector<float>& b, int64_t row_b, int64_t n) {
  double sum = 0.0;
  for (int64_t x = 0; x < n; ++x) {
    sum += static_cast<double>(a[static_cast<size_t>(row_a * n + x)]) * b[static_cast<size_t>(row_b * n + x)];
  }
  return sum;
}

struct Case {
  std::string name;
  int64_t rows_outer, rows_inner;
  Pattern attends;
};

std::vector<Case> cases() {
  return {
      {"band edge", 48, 16, [](int64_t o, int64_t i) { return o <= 2 * i + 3; }},
      {"band edge, odd outer rows", 37, 16, [](int64_t o, int64_t i) { return o >= 20 + i; }},
      {"last outer row only", 37, 16, [](int64_t o, int64_t) { return o == 36; }},
      {"an empty block of inner rows", 40, 16, [](int64_t o, int64_t i) { return i >= 8 && (o + i) % 3 != 0; }},
      {"one attended pair", 33, 9, [](int64_t o, int64_t i) { return o == 17 && i == 8; }},
      {"nothing attended", 24, 16, [](int64_t, int64_t) { return false; }},
      {"every pair", 29, 13, [](int64_t, int64_t) { return true; }},
      {"inner rows wider than a word", 40, 72, [](int64_t o, int64_t i) { return i <= o + 30; }},
  };
}

constexpr int64_t kD = 24, kE = 16;
constexpr float kScale = 0.3f;

// Forward: the outer rows are queries, the inner rows keys. The tile runs twice (the second time
// on the statistics the first left), so the online rescaling is covered; compared as O = acc / l.
void check_forward(const Case& c) {
  const int64_t nq = c.rows_outer, nk = c.rows_inner;
  const auto q = random_values(nq * kD, 1), k1 = random_values(nk * kD, 2), v1 = random_values(nk * kE, 3);
  const auto k2 = random_values(nk * kD, 4), v2 = random_values(nk * kE, 5);
  const auto bits = tile_bits(nq, nk, c.attends);
  const auto q_t = transposed(q, nq, kD);
  std::vector<float> s(static_cast<size_t>(nk * nq)), row_max(static_cast<size_t>(nq), -INFINITY),
      row_sum(static_cast<size_t>(nq), 0.0f), acc(static_cast<size_t>(nq * kE), 0.0f);
  for (const auto* kv : {&k1, &k2}) {
    std::fill(s.begin(), s.end(), kNaN);
    kernels::ForwardTile t;
    t.q_t = q_t.data();
    t.k = kv == &k1 ? k1.data() : k2.data();
    t.v = kv == &k1 ? v1.data() : v2.data();
    t.rows_q = nq, t.rows_k = nk, t.d = kD, t.e = kE, t.scale = kScale;
    t.bits = bits.data(), t.bit_stride = nk;
    t.s = s.data(), t.row_max = row_max.data(), t.row_sum = row_sum.data(), t.acc = acc.data();
    kernels::forward_tile(t);
  }
  double largest = 0.0;
  for (int64_t o = 0; o < nq; ++o) {
    std::vector<double> scores;
    std::vector<const float*> values;
    for (int which = 0; which < 2; ++which) {
      for (int64_t i = 0; i < nk; ++i) {
        if (!c.attends(o, i)) continue;
        scores.push_back(kScale * dot(q, o, which == 0 ? k1 : k2, i, kD));
        values.push_back((which == 0 ? v1 : v2).data() + i * kE);
      }
    }
    if (scores.empty()) {  // nothing attended: the statistics and the accumulator stay as they were
      EXPECT_EQ(row_max[static_cast<size_t>(o)], -INFINITY) << "row " << o;
      EXPECT_EQ(row_sum[static_cast<size_t>(o)], 0.0f) << "row " << o;
      for (int64_t x = 0; x < kE; ++x) EXPECT_EQ(acc[static_cast<size_t>(o * kE + x)], 0.0f) << "row " << o;
      continue;
    }
    double m = kNegInf, l = 0.0;
    for (double score : scores) m = std::max(m, score);
    std::vector<double> out(kE, 0.0);
    for (size_t j = 0; j < scores.size(); ++j) {
      const double p = std::exp(scores[j] - m);
      l += p;
      for (int64_t x = 0; x < kE; ++x) out[static_cast<size_t>(x)] += p * values[j][x];
    }
    const double tolerance = spattn::testing::fp32_tolerance(kD + 2 * nk, 1.0);
    EXPECT_NEAR(row_max[static_cast<size_t>(o)], m, tolerance) << "row " << o;
    for (int64_t x = 0; x < kE; ++x) {
      const double got = acc[static_cast<size_t>(o * kE + x)] / row_sum[static_cast<size_t>(o)];
      EXPECT_NEAR(got, out[static_cast<size_t>(x)] / l, tolerance) << "row " << o << " col " << x;
      largest = std::max(largest, std::fabs(got));
    }
  }
  if (c.name != "nothing attended") {  // the outputs are not all zero
    EXPECT_GT(largest, 1e-3);
  }
}

// The backward's per-pair values for query r and key j: P = exp(scale q.k - lse) and
// dS = P (dO.v - delta), 0 where the pair does not attend.
struct Backward {
  std::vector<float> q, k, v, d_o, lse, delta;
  int64_t nq, nk;
  double p(int64_t r, int64_t j) const {
    return std::exp(kScale * dot(q, r, k, j, kD) - lse[static_cast<size_t>(r)]);
  }
  double ds(int64_t r, int64_t j) const {
    return p(r, j) * (dot(d_o, r, v, j, kE) - delta[static_cast<size_t>(r)]);
  }
};

Backward backward_inputs(int64_t nq, int64_t nk) {
  Backward b{random_values(nq * kD, 11), random_values(nk * kD, 12), random_values(nk * kE, 13),
             random_values(nq * kE, 14),  random_values(nq, 15),       random_values(nq, 16), nq, nk};
  return b;
}

// An accumulator after one step: got[o][x] (rows x width) must be start[o][x] + the sum over the
// inner rows i that o attends of weight(o, i) values[i][x]. Returns the largest change from start.
double check_accumulator(const char* name, const std::vector<float>& got, const std::vector<float>& start,
                         int64_t rows, int64_t width, int64_t inner_rows, const Pattern& attends,
                         const std::function<double(int64_t, int64_t)>& weight, const std::vector<float>& values,
                         double tolerance) {
  double changed = 0.0;
  for (int64_t o = 0; o < rows; ++o) {
    for (int64_t x = 0; x < width; ++x) {
      const auto at = static_cast<size_t>(o * width + x);
      double expected = start[at];
      for (int64_t i = 0; i < inner_rows; ++i) {
        if (attends(o, i)) expected += weight(o, i) * values[static_cast<size_t>(i * width + x)];
      }
      EXPECT_NEAR(got[at], expected, tolerance) << name << " row " << o << " col " << x;
      changed = std::max(changed, std::fabs(static_cast<double>(got[at]) - start[at]));
    }
  }
  return changed;
}

// dQ pass: the outer rows are queries, the inner rows keys; dq starts non-zero, as in a run.
void check_dq(const Case& c) {
  const int64_t nq = c.rows_outer, nk = c.rows_inner;
  const Backward b = backward_inputs(nq, nk);
  const auto bits = tile_bits(nq, nk, c.attends);
  const auto q_t = transposed(b.q, nq, kD), do_t = transposed(b.d_o, nq, kE);
  std::vector<float> s(static_cast<size_t>(nk * nq), kNaN);
  const std::vector<float> dq0 = random_values(nq * kD, 17);
  std::vector<float> dq = dq0;
  kernels::DqTile t;
  t.q_t = q_t.data(), t.do_t = do_t.data(), t.lse = b.lse.data(), t.delta = b.delta.data();
  t.k = b.k.data(), t.v = b.v.data();
  t.rows_q = nq, t.rows_k = nk, t.d = kD, t.e = kE, t.scale = kScale;
  t.bits = bits.data(), t.bit_stride = nk;
  t.s = s.data(), t.dq = dq.data();
  kernels::dq_tile(t);
  const double tolerance = spattn::testing::fp32_tolerance(kD + kE + nk, 4.0);
  const double changed = check_accumulator("dQ", dq, dq0, nq, kD, nk, c.attends,
                                           [&](int64_t r, int64_t j) { return b.ds(r, j); }, b.k, tolerance);
  if (c.name != "nothing attended") {
    EXPECT_GT(changed, 1e-4);
  }
}

// dK/dV pass: the outer rows are keys, the inner rows queries (the pattern's outer index is the key).
void check_dkdv(const Case& c) {
  const int64_t nk = c.rows_outer, nq = c.rows_inner;
  const Backward b = backward_inputs(nq, nk);
  const auto bits = tile_bits(nk, nq, c.attends);
  const auto k_t = transposed(b.k, nk, kD), v_t = transposed(b.v, nk, kE);
  std::vector<float> s(static_cast<size_t>(nq * nk), kNaN);
  const std::vector<float> dk0 = random_values(nk * kD, 18), dv0 = random_values(nk * kE, 19);
  std::vector<float> dk = dk0, dv = dv0;
  kernels::DkdvTile t;
  t.k_t = k_t.data(), t.v_t = v_t.data(), t.q = b.q.data(), t.d_o = b.d_o.data();
  t.lse = b.lse.data(), t.delta = b.delta.data();
  t.rows_k = nk, t.rows_q = nq, t.d = kD, t.e = kE, t.scale = kScale;
  t.bits = bits.data(), t.bit_stride = nq;
  t.s = s.data(), t.dk = dk.data(), t.dv = dv.data();
  kernels::dkdv_tile(t);
  const double tolerance = spattn::testing::fp32_tolerance(kD + kE + nq, 4.0);
  const double changed = check_accumulator("dK", dk, dk0, nk, kD, nq, c.attends,
                                           [&](int64_t j, int64_t r) { return b.ds(r, j); }, b.q, tolerance);
  check_accumulator("dV", dv, dv0, nk, kE, nq, c.attends, [&](int64_t j, int64_t r) { return b.p(r, j); }, b.d_o,
                    tolerance);
  if (c.name != "nothing attended") {
    EXPECT_GT(changed, 1e-4);
  }
}

template <typename Check>
void for_every_isa_and_case(Check check) {
  const spattn_test::IsaGuard guard;
  for (KernelIsa isa : spattn_test::supported_isas()) {
    kernels::set_kernel_isa(isa);
    for (const Case& c : cases()) {
      SCOPED_TRACE(std::string(kernels::kernel_isa_name(isa)) + ": " + c.name + " (" +
                   std::to_string(c.rows_outer) + " x " + std::to_string(c.rows_inner) + ")");
      check(c);
    }
  }
}

}  // namespace

TEST(FlashKernelsPartialTiles, ForwardMatchesTheTileInFp64) { for_every_isa_and_case(check_forward); }
TEST(FlashKernelsPartialTiles, DqMatchesTheTileInFp64) { for_every_isa_and_case(check_dq); }
TEST(FlashKernelsPartialTiles, DkdvMatchesTheTileInFp64) { for_every_isa_and_case(check_dkdv); }
