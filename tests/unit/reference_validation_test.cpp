// Every argument check of the reference, one test each, checking the message names the argument
// and the values.
#include <spattn/error.hpp>
#include <spattn/reference.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using spattn::TensorView;
using sparse_formats::CsrPattern;
using sparse_formats::CsrPatternView;
using ::testing::HasSubstr;
namespace reference = spattn::reference;

// Runs `call`, which must throw spattn::InvalidArgument whose message contains `expected`.
void expect_invalid(const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one saying: " << expected;
  } catch (const spattn::InvalidArgument& error) {
    EXPECT_THAT(error.what(), HasSubstr(expected));
  }
}

// A valid problem: batch 2, heads 4, kv_heads 2, seqlen_q 3, seqlen_k 5, head_dim 4, head_dim_v 2.
// Tests break one thing at a time. The arrays are large enough for every shape used below.
struct Valid {
  std::vector<double> data = std::vector<double>(1024, 0.5);
  TensorView<const double> q = TensorView<const double>::contiguous(data.data(), 2, 4, 3, 4);
  TensorView<const double> k = TensorView<const double>::contiguous(data.data(), 2, 2, 5, 4);
  TensorView<const double> v = TensorView<const double>::contiguous(data.data(), 2, 2, 5, 2);
  TensorView<const double> d_o = TensorView<const double>::contiguous(data.data(), 2, 4, 3, 2);
  CsrPattern<int32_t> full = CsrPattern<int32_t>(3, 5, {0, 5, 10, 15}, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
  reference::MaskList<int32_t> masks{full.view()};

  void forward(double scale = 0.5) const { reference::forward(q, k, v, masks, scale); }
  void backward(double scale = 0.5) const { reference::backward(q, k, v, d_o, masks, scale); }
};

TEST(ReferenceValidation, ValidProblemIsAccepted) {
  const Valid valid;
  EXPECT_NO_THROW(valid.forward());
  EXPECT_NO_THROW(valid.backward());
}

TEST(ReferenceValidation, KHeadDimDiffersFromQ) {
  Valid bad;
  bad.k.shape[3] = 3;
  expect_invalid([&] { bad.forward(); }, "reference::forward: k has head_dim 3, q has 4");
}

TEST(ReferenceValidation, KBatchDiffersFromQ) {
  Valid bad;
  bad.k.shape[0] = 1;
  expect_invalid([&] { bad.forward(); }, "reference::forward: k has batch 1, q has 2");
}

TEST(ReferenceValidation, VBatchDiffersFromQ) {
  Valid bad;
  bad.v.shape[0] = 3;
  expect_invalid([&] { bad.forward(); }, "reference::forward: v has batch 3, q has 2");
}

TEST(ReferenceValidation, VSeqlenDiffersFromK) {
  Valid bad;
  bad.v.shape[2] = 4;
  expect_invalid([&] { bad.forward(); }, "reference::forward: v has seqlen 4, k has 5");
}

TEST(ReferenceValidation, VHeadsDifferFromK) {
  Valid bad;
  bad.v.shape[1] = 1;
  expect_invalid([&] { bad.forward(); }, "reference::forward: v has 1 heads, k has 2");
}

TEST(ReferenceValidation, HeadsNotAMultipleOfKvHeads) {
  Valid bad;
  bad.k.shape[1] = 3;
  bad.v.shape[1] = 3;
  expect_invalid([&] { bad.forward(); }, "reference::forward: q has 4 heads, not a multiple of k's 3");
}

TEST(ReferenceValidation, ZeroKvHeadsWithQueryHeads) {
  Valid bad;
  bad.k.shape[1] = 0;
  bad.v.shape[1] = 0;
  expect_invalid([&] { bad.forward(); }, "reference::forward: k has 0 heads, q has 4");
}

TEST(ReferenceValidation, MaskCountIsNotOneHeadsOrBatchTimesHeads) {
  Valid bad;
  bad.masks.assign(3, bad.full.view());
  expect_invalid([&] { bad.forward(); },
                 "reference::forward: masks has 3 entries, expected 1, heads = 4 or batch * heads = 8");
}

TEST(ReferenceValidation, MaskShapeDiffersFromSeqlens) {
  Valid bad;
  const auto narrow = CsrPattern<int32_t>::empty(3, 4);
  bad.masks.assign(4, bad.full.view());
  bad.masks[2] = narrow.view();
  expect_invalid([&] { bad.forward(); },
                 "reference::forward: masks[2] is 3 x 4, expected seqlen_q x seqlen_k = 3 x 5");
}

TEST(ReferenceValidation, ScaleIsNaN) {
  const Valid bad;
  expect_invalid([&] { bad.forward(std::nan("")); }, "reference::forward: scale = nan is not finite");
}

TEST(ReferenceValidation, ScaleIsInfinite) {
  const Valid bad;
  expect_invalid([&] { bad.backward(-std::numeric_limits<double>::infinity()); },
                 "reference::backward: scale = -inf is not finite");
}

TEST(ReferenceValidation, NullDataWithEntries) {
  Valid bad;
  bad.q.data = nullptr;
  expect_invalid([&] { bad.forward(); }, "reference::forward: q has data = nullptr but shape (2, 4, 3, 4) (96 entries)");
}

TEST(ReferenceValidation, NullDataWithoutEntriesIsAccepted) {
  Valid empty;
  empty.q = TensorView<const double>::contiguous(nullptr, 2, 4, 0, 4);
  empty.d_o = TensorView<const double>::contiguous(nullptr, 2, 4, 0, 2);
  const auto mask = CsrPattern<int32_t>::empty(0, 5);
  empty.masks = {mask.view()};
  EXPECT_NO_THROW(empty.forward());
  EXPECT_NO_THROW(empty.backward());
}

TEST(ReferenceValidation, NegativeShape) {
  Valid bad;
  bad.k.shape[2] = -1;
  expect_invalid([&] { bad.forward(); }, "reference::forward: k has a negative shape (2, 2, -1, 4)");
}

TEST(ReferenceValidation, ShapeWhoseSizeOverflows) {
  Valid bad;
  bad.v.shape = {2, 2, int64_t{1} << 31, int64_t{1} << 31};
  expect_invalid([&] { bad.forward(); }, "reference::forward: v has shape (2, 2, 2147483648, 2147483648), whose size overflows int64");
}

TEST(ReferenceValidation, DoBatchDiffersFromQ) {
  Valid bad;
  bad.d_o.shape[0] = 1;
  expect_invalid([&] { bad.backward(); }, "reference::backward: d_o has batch 1, q has 2");
}

TEST(ReferenceValidation, DoHeadsDifferFromQ) {
  Valid bad;
  bad.d_o.shape[1] = 2;
  expect_invalid([&] { bad.backward(); }, "reference::backward: d_o has 2 heads, q has 4");
}

TEST(ReferenceValidation, DoSeqlenDiffersFromQ) {
  Valid bad;
  bad.d_o.shape[2] = 2;
  expect_invalid([&] { bad.backward(); }, "reference::backward: d_o has seqlen 2, q has 3");
}

TEST(ReferenceValidation, DoHeadDimDiffersFromV) {
  Valid bad;
  bad.d_o.shape[3] = 4;
  expect_invalid([&] { bad.backward(); }, "reference::backward: d_o has head_dim 4, v has 2");
}

TEST(ReferenceValidation, BackwardChecksLikeForward) {
  Valid bad;
  bad.k.shape[3] = 5;
  expect_invalid([&] { bad.backward(); }, "reference::backward: k has head_dim 5, q has 4");
}

// ---- cheap mask structure checks (full checks live in sparse_formats::validate) ----------------

TEST(ReferenceValidation, MaskRowPtrNull) {
  Valid bad;
  bad.masks[0].row_ptr = nullptr;
  expect_invalid([&] { bad.forward(); }, "reference::forward: masks[0].row_ptr is null (3 rows)");
}

TEST(ReferenceValidation, MaskRowPtrDoesNotStartAtZero) {
  Valid bad;
  bad.full.row_ptr[0] = 1;
  expect_invalid([&] { bad.forward(); }, "reference::forward: masks[0].row_ptr[0] = 1, expected 0");
}

TEST(ReferenceValidation, MaskRowPtrDecreases) {
  Valid bad;
  bad.full.row_ptr[2] = 3;  // row_ptr = 0 5 3 15
  expect_invalid([&] { bad.forward(); }, "reference::forward: masks[0].row_ptr[2] = 3 < row_ptr[1] = 5");
}

TEST(ReferenceValidation, MaskColIdxNull) {
  Valid bad;
  bad.masks[0].col_idx = nullptr;
  expect_invalid([&] { bad.forward(); }, "reference::forward: masks[0].col_idx is null but nnz = 15");
}

TEST(ReferenceValidation, MaskColumnOutOfRange) {
  Valid bad;
  bad.full.col_idx[7] = 5;  // row 1: 0 1 5 3 4
  expect_invalid([&] { bad.forward(); }, "reference::forward: masks[0].col_idx[7] = 5 is out of range [0, 5) (row 1)");
}

TEST(ReferenceValidation, MaskColumnsNotIncreasing) {
  Valid bad;
  bad.full.col_idx[11] = 0;  // row 2: 0 0 2 3 4
  expect_invalid([&] { bad.forward(); },
                 "reference::forward: masks[0].col_idx[11] = 0 does not exceed col_idx[10] = 0 (row 2");
}

TEST(ReferenceValidation, Int64MasksAreCheckedToo) {
  Valid bad;
  const auto narrow = CsrPattern<int64_t>::empty(2, 5);
  const reference::MaskList<int64_t> masks{narrow.view()};
  expect_invalid([&] { reference::forward(bad.q, bad.k, bad.v, masks, 1.0); },
                 "reference::forward: masks[0] is 2 x 5, expected seqlen_q x seqlen_k = 3 x 5");
}

// ---- the paper's problem ------------------------------------------------------------------------

struct ValidPaper {
  std::vector<double> data = std::vector<double>(64, 0.25);
  reference::PaperProblem<int32_t> problem{4, 2, data.data(), data.data(), data.data(), data.data(), data.data(), data.data()};
};

TEST(ReferenceValidation, PaperNegativeSize) {
  ValidPaper bad;
  bad.problem.n = -4;
  expect_invalid([&] { reference::paper_loss(bad.problem); }, "reference::paper_loss: n = -4, d = 2 (must be >= 0)");
}

TEST(ReferenceValidation, PaperNullInput) {
  ValidPaper bad;
  bad.problem.a3 = nullptr;
  expect_invalid([&] { reference::paper_gradient(bad.problem); }, "reference::paper_gradient: a3 is null but n * d = 8");
}

TEST(ReferenceValidation, PaperNullVariable) {
  ValidPaper bad;
  bad.problem.x = nullptr;
  expect_invalid([&] { reference::paper_loss(bad.problem); }, "reference::paper_loss: x is null but d * d = 4");
}

TEST(ReferenceValidation, PaperScaleNotFinite) {
  ValidPaper bad;
  bad.problem.scale = std::numeric_limits<double>::infinity();
  expect_invalid([&] { reference::paper_loss(bad.problem); }, "reference::paper_loss: scale = inf is not finite");
}

TEST(ReferenceValidation, PaperMaskShape) {
  ValidPaper bad;
  const auto mask = CsrPattern<int32_t>::empty(4, 3);
  const auto view = mask.view();
  bad.problem.mask = &view;
  expect_invalid([&] { reference::paper_gradient(bad.problem); },
                 "reference::paper_gradient: mask is 4 x 3, expected n x n = 4 x 4");
}

}  // namespace
