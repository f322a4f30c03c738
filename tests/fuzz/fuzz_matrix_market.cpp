// Fuzz target: the Matrix Market reader on any bytes. It must read or refuse (FormatError) in
// memory bounded by the input, never crash, hang or throw anything else; what it reads must be a
// valid CSR of the declared shape.
#include <sparse_formats/error.hpp>
#include <sparse_formats/matrix_market.hpp>
#include <sparse_formats/validate.hpp>

#include "fuzz_support.hpp"

#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const sparse_formats::MatrixMarketData read = sparse_formats::read_matrix_market(in, "<fuzz>");
    if (read.is_dense) {
      if (static_cast<int64_t>(read.dense.size()) != read.num_rows * read.num_cols) {
        spattn_fuzz::finding("array file: dense holds " + std::to_string(read.dense.size()) + " values for " +
                             std::to_string(read.num_rows) + " x " + std::to_string(read.num_cols));
      }
    } else {
      sparse_formats::validate(read.csr, "read CSR");  // throws FormatError: a finding below
      if (read.csr.num_rows() != read.num_rows || read.csr.num_cols() != read.num_cols) {
        spattn_fuzz::finding("CSR shape differs from the size line");
      }
    }
  } catch (const sparse_formats::FormatError& error) {
    if (std::string(error.what()).rfind("<fuzz>", 0) != 0) {
      spattn_fuzz::finding(std::string("a refusal that does not name the source: ") + error.what());
    }
  }
  return 0;
}
