// Block-diagonal masks of packed documents (variable-length batches), optionally causal inside
// each document, and the even split used when only a document count is given.
#include <sparse_formats/patterns.hpp>

#include "patterns_internal.hpp"

#include <algorithm>

namespace sparse_formats {

using namespace patterns_internal;

namespace {

// Checks one length list and returns its prefix sums (size + 1 entries, starting at 0).
std::vector<int64_t> document_starts(const std::vector<int64_t>& lengths, const char* key,
                                     const char* seqlen_name, int64_t seqlen) {
  std::vector<int64_t> starts(lengths.size() + 1, 0);
  for (size_t d = 0; d < lengths.size(); ++d) {
    if (lengths[d] < 0) fail("documents: ", key, "[", d, "] = ", lengths[d], " must be >= 0");
    starts[d + 1] = sat_add(starts[d], lengths[d]);
  }
  if (starts.back() != seqlen) {
    fail("documents: ", key, " sum to ", starts.back(), " but ", seqlen_name, " = ", seqlen, " (",
         lengths.size(), " documents)");
  }
  return starts;
}

}  // namespace

std::vector<int64_t> even_lengths(int64_t total, int64_t num_docs) {
  check_at_least("documents", "seqlen", total, 0);
  check_at_least("documents", "num_docs", num_docs, 1);
  // Allocation is bounded by the sequence: more documents than tokens would all but one be empty.
  if (num_docs > std::max<int64_t>(total, 1)) {
    fail("documents: num_docs = ", num_docs, " exceeds the ", total,
         " tokens to split (every document needs a token)");
  }
  // Document d ends at floor((d + 1) * total / num_docs), tracked without overflow as
  // (d + 1) * quotient + floor((d + 1) * remainder / num_docs).
  const int64_t quotient = total / num_docs;
  const int64_t remainder = total % num_docs;
  std::vector<int64_t> lengths(static_cast<size_t>(num_docs), quotient);
  int64_t carry = 0;  // (d + 1) * remainder mod num_docs
  for (auto& length : lengths) {
    if (carry >= num_docs - remainder) {
      carry -= num_docs - remainder;
      ++length;
    } else {
      carry += remainder;
    }
  }
  return lengths;
}

template <typename Build>
auto documents_rows(const Build& build, int64_t seqlen_q, int64_t seqlen_k,
                                    const std::vector<int64_t>& lengths,
                                    const std::vector<int64_t>& lengths_k, bool causal) {
  build.check_shape("documents", seqlen_q, seqlen_k);
  const std::vector<int64_t> q_starts = document_starts(lengths, "lengths", "seqlen_q", seqlen_q);
  if (lengths_k.empty() && seqlen_q != seqlen_k) {
    fail("documents: seqlen_q = ", seqlen_q, " != seqlen_k = ", seqlen_k,
         ": a rectangular mask needs lengths_k, the key length of each document");
  }
  if (!lengths_k.empty() && lengths_k.size() != lengths.size()) {
    fail("documents: lengths has ", lengths.size(), " documents but lengths_k has ",
         lengths_k.size());
  }
  const std::vector<int64_t> k_starts =
      lengths_k.empty() ? q_starts : document_starts(lengths_k, "lengths_k", "seqlen_k", seqlen_k);

  return build("documents", seqlen_q, seqlen_k, [&](int64_t i, auto& row) {
    // The document holding query i: the last start <= i (empty documents share their start).
    const auto next = std::upper_bound(q_starts.begin(), q_starts.end(), i);
    const size_t d = static_cast<size_t>(next - q_starts.begin()) - 1;
    const int64_t key_begin = k_starts[d];
    const int64_t key_end = k_starts[d + 1];
    if (!causal) {
      row.range(key_begin, key_end);
      return;
    }
    // Bottom-right aligned inside the document: local key b <= local query a + (len_k - len_q).
    const int64_t local_q = i - q_starts[d];
    const int64_t offset = (key_end - key_begin) - (q_starts[d + 1] - q_starts[d]);
    row.range(key_begin, std::min(key_end, key_begin + local_q + offset + 1));
  });
}

template <typename Index>
CsrPattern<Index> documents_pattern(int64_t seqlen_q, int64_t seqlen_k, const std::vector<int64_t>& lengths, const std::vector<int64_t>& lengths_k, bool causal) {
  return documents_rows(CsrRows<Index>{}, seqlen_q, seqlen_k, lengths, lengths_k, causal);
}
std::optional<IntervalPattern> patterns_internal::documents_intervals(int64_t seqlen_q, int64_t seqlen_k, const std::vector<int64_t>& lengths, const std::vector<int64_t>& lengths_k, bool causal) {
  return documents_rows(IntervalRows{}, seqlen_q, seqlen_k, lengths, lengths_k, causal);
}

template CsrPattern<int32_t> documents_pattern<int32_t>(int64_t, int64_t,
                                                        const std::vector<int64_t>&,
                                                        const std::vector<int64_t>&, bool);
template CsrPattern<int64_t> documents_pattern<int64_t>(int64_t, int64_t,
                                                        const std::vector<int64_t>&,
                                                        const std::vector<int64_t>&, bool);

}  // namespace sparse_formats
