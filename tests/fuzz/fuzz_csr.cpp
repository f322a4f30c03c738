// Fuzz target: CSR validation and the conversions. The bytes give a shape in [0, 40] x [0, 40],
// row offsets and columns (most of them invalid: validate must refuse those with FormatError, and
// only those). A valid pattern must survive, exactly: dense and back, BSR at block sizes in [1, 8]
// and back (int32 and int64 indices), and a double transpose.
#include <sparse_formats/convert.hpp>
#include <sparse_formats/error.hpp>
#include <sparse_formats/validate.hpp>

#include "fuzz_support.hpp"

#include <string>
#include <vector>

namespace {

using Pattern = sparse_formats::CsrPattern<int64_t>;

bool same(const Pattern& a, const Pattern& b) {
  return a.num_rows == b.num_rows && a.num_cols == b.num_cols && a.row_ptr == b.row_ptr && a.col_idx == b.col_idx;
}

void expect_same(const Pattern& got, const Pattern& want, const std::string& what) {
  if (!same(got, want)) spattn_fuzz::finding(what + " changed the pattern");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spattn_fuzz::Bytes bytes(data, size);
  const int64_t rows = bytes.integer(0, 40), cols = bytes.integer(0, 40);
  const int64_t block_m = bytes.integer(1, 8), block_n = bytes.integer(1, 8);
  // Mostly increasing offsets and columns, with the bytes free to break any rule.
  Pattern pattern(rows, cols, {}, {});
  int64_t offset = 0;
  pattern.row_ptr.push_back(bytes.bit() ? 0 : bytes.integer(-2, 2));
  for (int64_t r = 0; r < rows; ++r) {
    offset += bytes.integer(-1, 6);
    pattern.row_ptr.push_back(offset);
  }
  if (bytes.bit()) pattern.row_ptr.pop_back();  // a wrong length now and then
  const int64_t nnz = pattern.row_ptr.empty() ? 0 : std::max<int64_t>(pattern.row_ptr.back(), 0);
  int64_t column = -1;
  for (int64_t p = 0; p < nnz; ++p) {
    column = bytes.bit() ? column + bytes.integer(1, 4) : bytes.integer(-1, 41);
    if (column >= cols) column = bytes.integer(0, 2) - 1;
    pattern.col_idx.push_back(column);
  }
  try {
    sparse_formats::validate(pattern, "fuzzed pattern");
  } catch (const sparse_formats::FormatError&) {
    return 0;
  }
  const auto dense = sparse_formats::csr_pattern_to_dense(pattern.view());
  expect_same(sparse_formats::dense_to_csr_pattern<int64_t>(dense.data(), rows, cols), pattern, "dense round trip");
  const auto bsr = sparse_formats::csr_to_bsr_mask(pattern.view(), block_m, block_n);
  try {
    sparse_formats::validate(bsr, "converted BSR mask");
  } catch (const sparse_formats::FormatError& error) {
    spattn_fuzz::finding(std::string("csr_to_bsr_mask made an invalid BSR mask: ") + error.what());
  }
  expect_same(sparse_formats::bsr_mask_to_csr(bsr), pattern, "BSR round trip");
  const auto narrow = sparse_formats::convert_index<int32_t>(pattern.view());
  const auto bsr32 = sparse_formats::csr_to_bsr_mask(narrow.view(), block_m, block_n);
  expect_same(sparse_formats::convert_index<int64_t>(sparse_formats::bsr_mask_to_csr(bsr32).view()), pattern,
              "int32 BSR round trip");
  expect_same(sparse_formats::transpose(sparse_formats::transpose(pattern.view()).view()), pattern, "double transpose");
  return 0;
}
