// Fuzz target: the PATTERN-SPEC parser and mask generation at small sizes. Two bytes choose
// seqlen_q and seqlen_k in [0, 63], the rest is the spec. Parsing refuses (FormatError) or gives a
// spec that generates a valid pattern of that shape, whose own formatted spec generates the same.
#include <sparse_formats/error.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>
#include <sparse_formats/validate.hpp>

#include "fuzz_support.hpp"

#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  spattn_fuzz::Bytes bytes(data, size);
  const int64_t seqlen_q = bytes.byte() % 64, seqlen_k = bytes.byte() % 64;
  const std::string text = bytes.rest();
  sparse_formats::PatternSpec spec;
  try {
    spec = sparse_formats::parse_pattern_spec(text);
  } catch (const sparse_formats::FormatError&) {
    return 0;
  }
  sparse_formats::CsrPattern<int64_t> pattern;
  try {
    pattern = sparse_formats::make_pattern<int64_t>(spec, seqlen_q, seqlen_k);
  } catch (const sparse_formats::FormatError&) {
    return 0;  // parameters this shape refuses (a window wider than allowed, ...)
  }
  try {
    sparse_formats::validate(pattern, "generated pattern");
  } catch (const sparse_formats::FormatError& error) {
    spattn_fuzz::finding("'" + text + "' generated an invalid pattern: " + error.what());
  }
  if (pattern.num_rows != seqlen_q || pattern.num_cols != seqlen_k) spattn_fuzz::finding("'" + text + "': wrong shape");
  // The interval form, where the spec has one, describes the same pairs.
  std::optional<sparse_formats::IntervalPattern> intervals;
  try {
    intervals = sparse_formats::make_interval_pattern(spec, seqlen_q, seqlen_k);
  } catch (const sparse_formats::FormatError& error) {
    spattn_fuzz::finding("'" + text + "' builds as pairs but its interval form is refused: " + error.what());
  }
  if (intervals) {
    try {
      sparse_formats::validate(*intervals, "generated intervals");
    } catch (const sparse_formats::FormatError& error) {
      spattn_fuzz::finding("'" + text + "' generated invalid intervals: " + error.what());
    }
    const auto expanded = sparse_formats::intervals_to_csr<int64_t>(*intervals);
    if (expanded.row_ptr != pattern.row_ptr || expanded.col_idx != pattern.col_idx) {
      spattn_fuzz::finding("'" + text + "': its intervals and its pairs differ");
    }
  }
  const std::string formatted = sparse_formats::format_pattern_spec(spec);
  const auto again = sparse_formats::make_pattern<int64_t>(sparse_formats::parse_pattern_spec(formatted), seqlen_q, seqlen_k);
  if (again.row_ptr != pattern.row_ptr || again.col_idx != pattern.col_idx) {
    spattn_fuzz::finding("'" + text + "' and its formatted spec '" + formatted + "' generate different patterns");
  }
  return 0;
}
