// A prepared attention mask: the set of (query, key) pairs that attend, validated once, and reused
// across calls, heads and layers. It lives in the most compact form that describes it exactly
// (MaskForm): full (no arrays), intervals (per query row a few [begin, end) key ranges: causal,
// windows, documents, prefix-LM, global tokens, block patterns; O(rows + intervals) words), blocks
// (block-sparse: per block row its stored blocks, full or partial with the in-block bits; 13 bytes
// a stored block: FlexAttention BlockMasks and block selections a model computes every step), or
// elements (every attended pair as CSR: random and other element-wise masks). What the planner and
// the schedules need is built from that form on first use and cached inside, so it is paid once
// per mask and tile size, not per call: the mask re-blocked at flash's tiles (tile lists,
// partial-tile bits), the block form's rows as intervals (what the schedules read of it),
// small_cache's counts for planning (O(seqlen + intervals) words), and
// small_cache's own structure (CSR copy and transpose, 3 nnz int64 words) only when small_cache
// runs. docs/api.md lists the costs.
//
//   auto mask = spattn::Mask::from_spec("sliding_window:w=256", n, n);
//   spattn::attention_forward(q, k, v, o, lse, mask, options);
//
// Copies share the structure and its caches (a Mask is a cheap handle); it is immutable, and
// safe to use from several threads.
#pragma once

#include <sparse_formats/csr.hpp>
#include <sparse_formats/intervals.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spattn {

class Mask;
namespace detail {
struct MaskCache;  // the schedules' prepared structures (src/mask/mask_cache.hpp)
// What a Mask caches for the library's planner and schedules; not for users (its type is private
// to the library). Masks that share their state (copies) share it.
MaskCache& cache_of(const Mask& mask);
}  // namespace detail

// The form a Mask lives in (above). form_name: "full", "intervals", "blocks" or "elements".
enum class MaskForm { full, intervals, blocks, elements };
const char* form_name(MaskForm form);

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
  // Validates the intervals (sparse_formats::validate; errors name `what`) and takes them. A pattern
  // that covers every pair is the full mask.
  static Mask from_intervals(sparse_formats::IntervalPattern&& pattern, const std::string& what = "mask");
  // Validates the block mask (sparse_formats::validate; errors name `what`: unsorted or repeated
  // block columns, out of range, a partial block with no bit or every bit set, ...) and takes it.
  // int32 indices: a mask of more than 2^31 - 1 rows, keys or stored blocks is refused by validate.
  static Mask from_blocks(sparse_formats::BsrMask<int32_t>&& pattern, const std::string& what = "mask");
  // A PATTERN-SPEC (`causal`, `sliding_window:w=128`, ...; see docs/patterns.md), built directly
  // in its compact form: intervals where the spec's rows are runs of keys
  // (sparse_formats::make_interval_pattern), else elements.
  static Mask from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k);

  int64_t seqlen_q() const;
  int64_t seqlen_k() const;
  int64_t nnz() const;       // attended pairs, |Omega| = Z_QK
  double density() const;   // nnz / (seqlen_q * seqlen_k); 0 for an empty shape
  bool is_full() const;     // every pair attends
  MaskForm form() const;    // full whenever is_full()
  // The interval form, or nullptr when the mask lives in another form.
  const sparse_formats::IntervalPattern* intervals() const;
  // The block form, or nullptr when the mask lives in another form.
  const sparse_formats::BsrMask<int32_t>* blocks() const;
  // The rows as intervals, what the schedules read of a structured mask: the interval form itself,
  // or the block form's rows (sparse_formats::bsr_mask_to_intervals), built on the first call
  // (O(stored blocks x block rows + partial bits)). nullptr for the full and element forms.
  const sparse_formats::IntervalPattern* row_intervals() const;
  // The bytes of the arrays the mask holds: its form's, plus the element CSR where csr() has built
  // one and a block mask's row intervals once built. The schedules' cached structures are not
  // included.
  int64_t memory_bytes() const;
  // The element-level structure, int64. For the full, interval and block forms it is built on the
  // first call (O(nnz) words: for a reference or an export, not what the schedules read), and so it
  // is for an element mask held as int32 (csr32()).
  sparse_formats::CsrPatternView<int64_t> csr() const;
  // The element form's own arrays where they are int32: an element mask holds int32 indices (4
  // bytes a pair) whenever its seqlen_k and nnz are below 2^31, and the schedules read these.
  // std::nullopt for the other forms and for element masks past int32 (held as int64: csr()).
  std::optional<sparse_formats::CsrPatternView<int32_t>> csr32() const;

 private:
  friend detail::MaskCache& detail::cache_of(const Mask& mask);
  struct State;
  explicit Mask(std::shared_ptr<State> state) : state_(std::move(state)) {}
  // The state of an interval or block mask of this shape; refuses a pair count int64 cannot hold.
  static std::shared_ptr<State> structured_state(int64_t seqlen_q, int64_t seqlen_k, const std::string& what);
  // The state of a valid element pattern, held as int32 where it fits (csr32()).
  template <typename Index>
  static std::shared_ptr<State> element_state(sparse_formats::CsrPattern<Index>&& pattern);
  std::shared_ptr<State> state_;
};

// The mask argument of every attention call and preview (spattn/attention.hpp,
// spattn/sparse_inputs.hpp): none (every query attends every key), one Mask shared by all heads, or
// one Mask per query head. The constructors are implicit on purpose, so that a call passes `mask`,
// `masks` or `{}`:
//
//   spattn::attention_forward(q, k, v, o, lse, {}, options);          // every pair attended
//   spattn::attention_forward(q, k, v, o, lse, causal, options);      // one mask for all heads
//   spattn::attention_forward(q, k, v, o, lse, per_head, options);    // std::vector<Mask>, one per head
class HeadMasks {
 public:
  HeadMasks() = default;
  HeadMasks(Mask mask);                // NOLINT(google-explicit-constructor): one for every head
  HeadMasks(std::vector<Mask> masks);  // NOLINT(google-explicit-constructor): masks[h] for query head h
  // One Mask per query head was given (the std::vector constructor, whatever its size).
  bool per_head() const { return per_head_; }
  // The masks a call with `heads` query heads of seqlen_q x seqlen_k runs with:
  // {Mask::full(seqlen_q, seqlen_k)} when none was given, else the masks given. A per-head list of
  // another size than `heads` is an InvalidArgument naming `where` and both counts ("masks has 2
  // masks, q has 3 heads"); the masks' own shapes are the entry points' to check.
  std::vector<Mask> resolve(const char* where, int64_t heads, int64_t seqlen_q, int64_t seqlen_k) const;

 private:
  std::vector<Mask> masks_;
  bool given_ = false;
  bool per_head_ = false;
};

}  // namespace spattn
