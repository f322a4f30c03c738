#include <sparse_formats/csr.hpp>

#include <gtest/gtest.h>

TEST(Smoke, EmptyPatternHasZeroEntries) {
  const auto pattern = sparse_formats::CsrPattern<int32_t>::empty(3, 4);
  EXPECT_EQ(pattern.nnz(), 0);
  EXPECT_EQ(pattern.row_ptr.size(), 4u);
}
