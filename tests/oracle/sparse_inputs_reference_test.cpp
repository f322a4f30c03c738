// The fp64 reference on CSR inputs (reference.hpp, "Sparse inputs"): equal to the reference on the
// densified tensors (built here from dense arrays, independently of the reference's own
// densifying), for several heads, grouped-query kv heads and per-head masks; a hand-checked case
// where a CSR input's missing entries must read as zeros; clear errors for bad CSR.
#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include "support/compare.hpp"
#include "support/reference_fixtures.hpp"
#include "support/test_helpers.hpp"

#include <sparse_formats/convert.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace {

namespace reference = spattn::reference;
using spattn::TensorView;
using Csr = sparse_formats::CsrMatrix<int64_t, double>;

// A (batch, heads, seqlen, dim) tensor with about `density` of its entries nonzero, dense and as
// one CSR per head.
struct Tensor {
  std::vector<double> dense;
  std::vector<Csr> heads;
  reference::CsrTensor<int64_t> csr;
  TensorView<const double> view;
};

Tensor make_tensor(int64_t batch, int64_t heads, int64_t seqlen, int64_t dim, double density, uint64_t seed) {
  Tensor t;
  t.dense = spattn::testing::random_values(static_cast<size_t>(batch * heads * seqlen * dim), seed);
  std::mt19937_64 engine(seed + 99);
  std::bernoulli_distribution keep(density);
  for (double& x : t.dense) x = keep(engine) ? x : 0.0;
  for (int64_t h = 0; h < batch * heads; ++h) {
    t.heads.push_back(sparse_formats::dense_to_csr<int64_t, double>(t.dense.data() + h * seqlen * dim, seqlen, dim));
  }
  t.csr.batch = batch;
  t.csr.heads = heads;
  for (const Csr& m : t.heads) t.csr.matrices.push_back(m.view());
  t.view = TensorView<const double>::contiguous(t.dense.data(), batch, heads, seqlen, dim);
  return t;
}

TEST(SparseInputsReference, EqualsTheReferenceOnTheDensifiedTensors) {
  // batch 2, 4 query heads over 2 kv heads (grouped-query), a causal mask per query head.
  const int64_t batch = 2, heads = 4, kv_heads = 2, m = 9, n = 11, d = 6, e = 5;
  const Tensor q = make_tensor(batch, heads, m, d, 0.4, 1);
  const Tensor k = make_tensor(batch, kv_heads, n, d, 0.4, 2);
  const Tensor v = make_tensor(batch, kv_heads, n, e, 0.6, 3);
  const auto d_o = spattn::testing::random_values(static_cast<size_t>(batch * heads * m * e), 4);
  const auto d_o_view = TensorView<const double>::contiguous(d_o.data(), batch, heads, m, e);
  std::vector<sparse_formats::CsrPattern<int64_t>> patterns;
  reference::MaskList<int64_t> masks;
  for (int64_t h = 0; h < heads; ++h) {
    patterns.push_back(spattn::testing::make_mask<int64_t>(m, n, [h](int64_t i, int64_t j) { return j <= i + h; }));
  }
  for (const auto& p : patterns) masks.push_back(p.view());
  const double scale = 0.7;

  const auto want = reference::forward<int64_t>(q.view, k.view, v.view, masks, scale);
  const auto got = reference::forward<int64_t>(q.csr, k.csr, v.csr, masks, scale);
  EXPECT_EQ(got.o, want.o);
  EXPECT_EQ(got.lse, want.lse);
  const auto want_b = reference::backward<int64_t>(q.view, k.view, v.view, d_o_view, masks, scale);
  const auto got_b = reference::backward<int64_t>(q.csr, k.csr, v.csr, d_o_view, masks, scale);
  EXPECT_EQ(got_b.dq, want_b.dq);
  EXPECT_EQ(got_b.dk, want_b.dk);
  EXPECT_EQ(got_b.dv, want_b.dv);
  EXPECT_GT(spattn::testing::max_abs(got_b.dk), 1e-3);  // non-trivial
}

// q = [[1, 0], [0, 0]] stored as one entry (row 1 empty); k = [[1, 0], [0, 2]] stored fully;
// v = [[1, 0], [0, 1]] with its diagonal. Full mask, scale 1. Row 0: scores (1, 0), so
// O_0 = (e, 1) / (e + 1). Row 1: scores (0, 0), O_1 = (1/2, 1/2): the empty row of q is a
// query of zeros (uniform attention), not a query that attends nothing.
TEST(SparseInputsReference, MissingEntriesAreZeros) {
  std::vector<int64_t> q_ptr{0, 1, 1}, q_idx{0}, k_ptr{0, 1, 2}, k_idx{0, 1}, v_ptr{0, 1, 2}, v_idx{0, 1};
  std::vector<double> q_val{1.0}, k_val{1.0, 2.0}, v_val{1.0, 1.0};
  reference::CsrTensor<int64_t> q{1, 1, {{{2, 2, q_ptr.data(), q_idx.data()}, q_val.data()}}};
  reference::CsrTensor<int64_t> k{1, 1, {{{2, 2, k_ptr.data(), k_idx.data()}, k_val.data()}}};
  reference::CsrTensor<int64_t> v{1, 1, {{{2, 2, v_ptr.data(), v_idx.data()}, v_val.data()}}};
  const auto full = spattn::testing::make_mask<int64_t>(2, 2, [](int64_t, int64_t) { return true; });
  const auto r = reference::forward<int64_t>(q, k, v, {full.view()}, 1.0);
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.o[0], e / (e + 1.0), 1e-15);
  EXPECT_NEAR(r.o[1], 1.0 / (e + 1.0), 1e-15);
  EXPECT_NEAR(r.o[2], 0.5, 1e-15);
  EXPECT_NEAR(r.o[3], 0.5, 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(2.0), 1e-15);
}

TEST(SparseInputsReference, BadCsrIsAClearErrorNamingTheMatrix) {
  using spattn::testing::contains;
  using spattn::testing::message_of;
  const Tensor q = make_tensor(1, 2, 4, 3, 0.5, 5);
  const Tensor k = make_tensor(1, 2, 4, 3, 0.5, 6);
  const Tensor v = make_tensor(1, 2, 4, 3, 0.5, 7);
  const auto full = spattn::testing::make_mask<int64_t>(4, 4, [](int64_t, int64_t) { return true; });
  const reference::MaskList<int64_t> masks{full.view()};
  const auto run = [&](const reference::CsrTensor<int64_t>& bad_k) {
    return message_of<spattn::InvalidArgument>([&] { reference::forward<int64_t>(q.csr, bad_k, v.csr, masks, 1.0); });
  };
  // Unsorted columns in k's second head.
  std::vector<int64_t> ptr{0, 2, 2, 2, 2}, unsorted{2, 0}, out_of_range{0, 3};
  std::vector<double> values{1.0, 2.0};
  auto bad = k.csr;
  bad.matrices[1] = {{4, 3, ptr.data(), unsorted.data()}, values.data()};
  EXPECT_TRUE(contains(run(bad), "reference::forward: k[1]"));
  EXPECT_TRUE(contains(run(bad), "col_idx[1] = 0"));
  bad.matrices[1] = {{4, 3, ptr.data(), out_of_range.data()}, values.data()};
  EXPECT_TRUE(contains(run(bad), "out of range [0, 3)"));
  // A head of another shape, a wrong head count, a NaN.
  bad.matrices[1] = {{4, 2, ptr.data(), unsorted.data()}, values.data()};
  EXPECT_TRUE(contains(run(bad), "k[1] is 4 x 2, expected the shape of the first matrix = 4 x 3"));
  bad = k.csr;
  bad.matrices.pop_back();
  EXPECT_TRUE(contains(run(bad), "k has 1 matrices, expected batch * heads = 2"));
  std::vector<int64_t> sorted{0, 2};
  std::vector<double> nan{1.0, std::nan("")};
  bad = k.csr;
  bad.matrices[0] = {{4, 3, ptr.data(), sorted.data()}, nan.data()};
  EXPECT_TRUE(contains(run(bad), "k[0].values[1] = nan is not finite"));
}

}  // namespace
