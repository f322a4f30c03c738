// The bound formulas, checked by hand.
#include <spattn/bounds.hpp>
#include <spattn/error.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace spattn::bounds;

TEST(Bounds, DenseBackwardBranchesByHand) {
  // n = 1024, d = 64, M = 1024: large = (2^20 * 2^12 + 2^10 * 2^18) / 2^10 = 2^22 + 2^18,
  // small = (2^20 * 2^6 + 2^10 * 2^12) / 2^5 = 2^21 + 2^17. M < d^2, so the small branch wins.
  const Bound b = dense_backward({1024, 1024, 64, 64}, 1024);
  EXPECT_DOUBLE_EQ(b.large_cache, 4194304.0 + 262144.0);
  EXPECT_DOUBLE_EQ(b.small_cache, 2097152.0 + 131072.0);
  EXPECT_DOUBLE_EQ(b.value, b.small_cache);
  EXPECT_EQ(b.branch, Branch::small_cache);
  EXPECT_DOUBLE_EQ(b.crossover_m, 4096.0);
}

TEST(Bounds, BranchesMeetAtDSquared) {
  for (int64_t d : {16, 64, 128}) {
    const double m = static_cast<double>(d * d);
    const Bound fwd = dense_forward({512, 512, d, d}, m);
    EXPECT_NEAR(fwd.large_cache / fwd.small_cache, 1.0, 1e-12);
    const Bound bwd = dense_backward({512, 512, d, d}, m);
    EXPECT_NEAR(bwd.large_cache / bwd.small_cache, 1.0, 1e-12);
    EXPECT_EQ(dense_backward({512, 512, d, d}, 4 * m).branch, Branch::large_cache);
    EXPECT_EQ(dense_backward({512, 512, d, d}, m / 4).branch, Branch::small_cache);
  }
}

TEST(Bounds, SparseReducesToDenseForDenseInputsAndMask) {
  // Z_input = n d, Z_QK = n^2: Z^2/M = n^2 d^2/M and Z sqrt(Z_QK)/sqrt(M) = n^2 d / sqrt(M).
  const Bound s = sparse(1024.0 * 64, 1024.0 * 1024, 2048);
  const Bound f = dense_forward({1024, 1024, 64, 64}, 2048);
  EXPECT_DOUBLE_EQ(s.large_cache, f.large_cache);
  EXPECT_DOUBLE_EQ(s.small_cache, f.small_cache);
  EXPECT_DOUBLE_EQ(s.crossover_m, 64.0 * 64.0);
}

TEST(Bounds, SparseCrossoverAtZInputSquaredOverZqk) {
  const Bound s = sparse(1000, 250, 10);
  EXPECT_DOUBLE_EQ(s.crossover_m, 4000.0);
  EXPECT_EQ(s.branch, Branch::small_cache);  // M = 10 < 4000
}

TEST(Bounds, CompulsoryCountsEveryInputAndOutputOnce) {
  // seqlen_q 3, seqlen_k 5, d 2, d_v 4: forward reads 3*2 + 5*2 + 5*4, writes 3*4 + 3.
  EXPECT_DOUBLE_EQ(compulsory_forward({3, 5, 2, 4}), 6 + 10 + 20 + 12 + 3);
  // backward reads Q K V O LSE dO = 6+10+20+12+3+12, writes dQ dK dV = 6+10+20.
  EXPECT_DOUBLE_EQ(compulsory_backward({3, 5, 2, 4}), 63 + 36);
}

TEST(Bounds, MatmulLowerBoundClampsAtZero) {
  EXPECT_DOUBLE_EQ(matmul_lower_bound(64, 64, 64, 64), 2.0 * 64 * 64 * 64 / 8 - 128);
  EXPECT_DOUBLE_EQ(matmul_lower_bound(2, 2, 2, 1e6), 0.0);
}

TEST(Bounds, BadArgumentsNameTheValue) {
  try {
    dense_backward({4, 4, 2, 2}, 0);
    FAIL();
  } catch (const spattn::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("M = 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dense_forward({-1, 4, 2, 2}, 8), spattn::InvalidArgument);
  EXPECT_THROW(sparse(-1, 4, 8), spattn::InvalidArgument);
}
