// A prepared attention mask: the set of (query, key) pairs that attend, held as CSR, validated
// once, and reused across calls, heads and layers. What the planner and the schedules need is
// built on first use and cached inside, so it is paid once per mask and tile size, not per call:
// the mask re-blocked at flash's tiles (tile lists, partial-tile bits), small_cache's counts for
// planning (O(seqlen) words), and small_cache's own structure (CSR copy and transpose, 3 nnz
// int64 words) only when small_cache runs. docs/api.md lists the costs.
//
//   auto mask = spattn::Mask::from_spec("sliding_window:w=256", n, n);
//   spattn::attention_forward(q, k, v, o, lse, mask, options);
//
// Copies share the structure and its caches (a Mask is a cheap handle); it is immutable, and
// safe to use from several threads.
#pragma once

#include <sparse_formats/csr.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace spattn {

namespace detail {
struct MaskCache;  // the schedules' prepared structures (src/mask/mask_cache.hpp)
}

class Mask {
 public:
  // Every query attends every key. Stores no index arrays until a schedule needs them.
  static Mask full(int64_t seqlen_q, int64_t seqlen_k);
  // Validates the pattern (sparse_formats::validate; errors name `what`) and copies it.
  static Mask from_csr(const sparse_formats::CsrPatternView<int32_t>& pattern,
                       const std::string& what = "mask");
  static Mask from_csr(const sparse_formats::CsrPatternView<int64_t>& pattern,
                       const std::string& what = "mask");
  // Validates and takes the pattern without copying.
  static Mask from_csr(sparse_formats::CsrPattern<int64_t>&& pattern, const std::string& what = "mask");
  // A PATTERN-SPEC (`causal`, `sliding_window:w=128`, ...; see docs/patterns.md), built directly
  // in compressed form.
  static Mask from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k);

  int64_t seqlen_q() const;
  int64_t seqlen_k() const;
  int64_t nnz() const;       // attended pairs, |Omega| = Z_QK
  double density() const;   // nnz / (seqlen_q * seqlen_k); 0 for an empty shape
  bool is_full() const;     // every pair attends
  // The element-level structure (for a full mask it is built on first call).
  sparse_formats::CsrPatternView<int64_t> csr() const;

  detail::MaskCache& cache() const;  // for the library's schedules

 private:
  struct State;
  explicit Mask(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace spattn
