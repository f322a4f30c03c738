// The flash steps for tiles narrower than a vector (src/cpu/kernels/flash_kernels_scalar.hpp) give
// the vector steps' results at one lane (flash_kernels_impl.hpp with Config<Lanes1, 1, 1, 1, 1>, compiled
// here), element for element: forward, dQ and dK/dV, full and partial tiles, rows that attend
// nothing, head dims 1, 7 and 64, outer tiles of 1 to 15 rows.
#include "cpu/kernels/flash_kernels.hpp"
#include "cpu/kernels/flash_kernels_isa.hpp"

#define SPATTN_KERNEL_NAMESPACE kernels_under_test
#include "cpu/kernels/flash_kernels_impl.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

namespace kernels = spattn::schedules::flash_kernels;
using OneLane = kernels::kernels_under_test::Config<kernels::kernels_under_test::Lanes1, 1, 1, 1, 1>;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Case {
  int64_t rows_outer, rows_inner, d, e;
  bool partial;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const int64_t outer : {1, 3, 15}) {
    for (const int64_t inner : {1, 5, 17}) {
      for (const int64_t d : {1, 7, 64}) {
        for (const bool partial : {false, true}) all.push_back({outer, inner, d, d == 7 ? 5 : d, partial});
      }
    }
  }
  return all;
}

class Tile {
 public:
  explicit Tile(uint32_t seed) : random_(seed) {}
  std::vector<float> values(int64_t count, float scale = 1.0f) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> out(static_cast<size_t>(count));
    for (float& x : out) x = normal(random_);
    return out;
  }
  // A partial tile's bits (bit o * stride + i), about half of them set; with more than one outer
  // row, the last attends nothing.
  std::vector<uint64_t> bits(int64_t rows_outer, int64_t stride) {
    std::vector<uint64_t> out(static_cast<size_t>((rows_outer * stride + 63) / 64 + 1), 0);
    std::bernoulli_distribution coin(0.5);
    for (int64_t o = 0; o < (rows_outer > 1 ? rows_outer - 1 : 1); ++o) {
      for (int64_t i = 0; i < stride; ++i) {
        const int64_t bit = o * stride + i;
        if (i == 0 || coin(random_)) out[static_cast<size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
      }
    }
    return out;
  }

 private:
  std::mt19937 random_;
};

void expect_same(const std::vector<float>& scalar, const std::vector<float>& lanes, const std::string& what) {
  ASSERT_EQ(scalar.size(), lanes.size());
  bool nonzero = false;
  for (size_t x = 0; x < scalar.size(); ++x) {
    ASSERT_EQ(scalar[x], lanes[x]) << what << " element " << x;
    nonzero = nonzero || scalar[x] != 0.0f;
  }
  EXPECT_TRUE(nonzero) << what << " is all zero";
}

TEST(FlashScalarSteps, ForwardMatchesTheOneLaneVectorStep) {
  uint32_t seed = 1;
  for (const Case& c : cases()) {
    SCOPED_TRACE("q " + std::to_string(c.rows_outer) + " k " + std::to_string(c.rows_inner) + " d " +
                 std::to_string(c.d) + (c.partial ? " partial" : " full"));
    Tile tile(seed++);
    const auto q_t = tile.values(c.d * c.rows_outer), k = tile.values(c.rows_inner * c.d, 2.0f);
    const auto v = tile.values(c.rows_inner * c.e);
    const auto bits = tile.bits(c.rows_outer, c.rows_inner);
    // Running statistics: row 0 has attended nothing yet, the others have.
    std::vector<float> row_max = tile.values(c.rows_outer), row_sum = tile.values(c.rows_outer),
                       acc = tile.values(c.rows_outer * c.e);
    row_max[0] = kNegInf;
    row_sum[0] = 0.0f;
    for (int64_t x = 0; x < c.e; ++x) acc[static_cast<size_t>(x)] = 0.0f;
    for (float& l : row_sum) l = l * l;
    std::vector<float> max_s = row_max, sum_s = row_sum, acc_s = acc, s_s(static_cast<size_t>(c.rows_inner * c.rows_outer));
    std::vector<float> max_l = row_max, sum_l = row_sum, acc_l = acc, s_l = s_s;
    kernels::ForwardTile t;
    t.q_t = q_t.data();
    t.k = k.data();
    t.v = v.data();
    t.rows_q = c.rows_outer;
    t.rows_k = c.rows_inner;
    t.d = c.d;
    t.e = c.e;
    t.scale = 0.3f;
    t.bits = c.partial ? bits.data() : nullptr;
    t.bit_stride = c.rows_inner;
    kernels::ForwardTile scalar = t, lanes = t;
    scalar.s = s_s.data(), scalar.row_max = max_s.data(), scalar.row_sum = sum_s.data(), scalar.acc = acc_s.data();
    lanes.s = s_l.data(), lanes.row_max = max_l.data(), lanes.row_sum = sum_l.data(), lanes.acc = acc_l.data();
    kernels::isa::forward_scalar(scalar);
    kernels::kernels_under_test::forward_step<OneLane>(lanes);
    expect_same(acc_s, acc_l, "acc");
    expect_same(sum_s, sum_l, "row_sum");
    for (size_t o = 0; o < max_s.size(); ++o) ASSERT_EQ(max_s[o], max_l[o]) << "row_max " << o;
  }
}

// A backward step's operands: the outer tile's two transposed (d, rows_outer) and (e, rows_outer),
// the inner tile's two row-major, the statistics of the query side (`stat_rows` rows, row 0 with
// LSE = -inf: a query that attends nothing).
struct BackwardOperands {
  std::vector<float> outer_t, outer_e_t, inner, inner_e, lse, delta;
};
BackwardOperands backward_operands(Tile& tile, const Case& c, int64_t stat_rows) {
  BackwardOperands x{tile.values(c.d * c.rows_outer), tile.values(c.e * c.rows_outer), tile.values(c.rows_inner * c.d),
                     tile.values(c.rows_inner * c.e), tile.values(stat_rows), tile.values(stat_rows)};
  x.lse[0] = kNegInf;
  return x;
}

TEST(FlashScalarSteps, DqAndDkdvMatchTheOneLaneVectorSteps) {
  uint32_t seed = 100;
  for (const Case& c : cases()) {
    SCOPED_TRACE("outer " + std::to_string(c.rows_outer) + " inner " + std::to_string(c.rows_inner) + " d " +
                 std::to_string(c.d) + (c.partial ? " partial" : " full"));
    Tile tile(seed++);
    const auto bits = tile.bits(c.rows_outer, c.rows_inner);
    std::vector<float> s_s(static_cast<size_t>(c.rows_inner * c.rows_outer)), s_l = s_s;
    {  // dQ: the outer tile is the query tile (Q^T, dO^T), the inner the key tile (K, V).
      const BackwardOperands x = backward_operands(tile, c, c.rows_outer);
      std::vector<float> dq_s = tile.values(c.rows_outer * c.d), dq_l = dq_s;
      kernels::DqTile t;
      t.q_t = x.outer_t.data(), t.do_t = x.outer_e_t.data(), t.k = x.inner.data(), t.v = x.inner_e.data();
      t.lse = x.lse.data(), t.delta = x.delta.data();
      t.rows_q = c.rows_outer, t.rows_k = c.rows_inner, t.d = c.d, t.e = c.e, t.scale = 0.3f;
      t.bits = c.partial ? bits.data() : nullptr;
      t.bit_stride = c.rows_inner;
      kernels::DqTile scalar = t, lanes = t;
      scalar.s = s_s.data(), scalar.dq = dq_s.data();
      lanes.s = s_l.data(), lanes.dq = dq_l.data();
      kernels::isa::dq_scalar(scalar);
      kernels::kernels_under_test::dq_step<OneLane>(lanes);
      expect_same(dq_s, dq_l, "dq");
    }
    {  // dK/dV: the outer tile is the key tile (K^T, V^T), the inner the query tile (Q, dO).
      const BackwardOperands x = backward_operands(tile, c, c.rows_inner);
      std::vector<float> dk_s = tile.values(c.rows_outer * c.d), dk_l = dk_s;
      std::vector<float> dv_s = tile.values(c.rows_outer * c.e), dv_l = dv_s;
      kernels::DkdvTile t;
      t.k_t = x.outer_t.data(), t.v_t = x.outer_e_t.data(), t.q = x.inner.data(), t.d_o = x.inner_e.data();
      t.lse = x.lse.data(), t.delta = x.delta.data();
      t.rows_k = c.rows_outer, t.rows_q = c.rows_inner, t.d = c.d, t.e = c.e, t.scale = 0.3f;
      t.bits = c.partial ? bits.data() : nullptr;
      t.bit_stride = c.rows_inner;
      kernels::DkdvTile scalar = t, lanes = t;
      scalar.s = s_s.data(), scalar.dk = dk_s.data(), scalar.dv = dv_s.data();
      lanes.s = s_l.data(), lanes.dk = dk_l.data(), lanes.dv = dv_l.data();
      kernels::isa::dkdv_scalar(scalar);
      kernels::kernels_under_test::dkdv_step<OneLane>(lanes);
      expect_same(dk_s, dk_l, "dk");
      expect_same(dv_s, dv_l, "dv");
    }
  }
}

}  // namespace
