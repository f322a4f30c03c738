// The prepared mask (include/spattn/mask.hpp) and its cache of schedule structures.
#include <spattn/mask.hpp>

#include "mask/mask_cache.hpp"

#include <spattn/error.hpp>

#include <sparse_formats/convert.hpp>
#include <sparse_formats/intervals.hpp>
#include <sparse_formats/patterns.hpp>
#include <sparse_formats/validate.hpp>

#include <limits>
#include <mutex>
#include <optional>
#include <type_traits>

namespace spattn {

struct Mask::State {
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t nnz = 0;
  bool full = false;
  std::optional<sparse_formats::IntervalPattern> intervals;  // the interval form
  std::optional<sparse_formats::BsrMask<int32_t>> blocks;    // the block form
  mutable std::mutex block_rows_mutex;                         // (taken after csr_mutex, never before)
  mutable std::optional<sparse_formats::IntervalPattern> block_rows;  // the block form's rows, lazily
  std::optional<sparse_formats::CsrPattern<int32_t>> elements32;  // the element form, where int32 holds it
  mutable std::mutex csr_mutex;
  mutable bool csr_built = false;                   // (under csr_mutex)
  mutable sparse_formats::CsrPattern<int64_t> csr;  // the element form past int32; built lazily for the others
  mutable detail::MaskCache cache;
};

const char* form_name(MaskForm form) {
  switch (form) {
    case MaskForm::full: return "full";
    case MaskForm::intervals: return "intervals";
    case MaskForm::blocks: return "blocks";
    case MaskForm::elements: return "elements";
  }
  return "unknown";
}

namespace {

// Whether an element mask's arrays fit int32: its columns (below seqlen_k) and its row pointers
// (up to nnz).
bool fits_int32(int64_t seqlen_k, int64_t nnz) {
  const int64_t top = std::numeric_limits<int32_t>::max();
  return seqlen_k <= top && nnz <= top;
}

}  // namespace

Mask Mask::full(int64_t seqlen_q, int64_t seqlen_k) {
  if (seqlen_q < 0 || seqlen_k < 0) {
    fail("Mask::full: seqlen_q = ", seqlen_q, " and seqlen_k = ", seqlen_k, " must be >= 0");
  }
  if (seqlen_k > 0 && seqlen_q > std::numeric_limits<int64_t>::max() / seqlen_k) {
    fail("Mask::full: seqlen_q x seqlen_k = ", seqlen_q, " x ", seqlen_k, " pairs overflows int64");
  }
  auto state = std::make_shared<State>();
  state->seqlen_q = seqlen_q;
  state->seqlen_k = seqlen_k;
  state->full = true;
  state->nnz = seqlen_q * seqlen_k;
  return Mask(std::move(state));
}

// The state of a valid element pattern of either index type, taken over: int32 arrays where they
// fit (converted from int64), else int64.
template <typename Index>
std::shared_ptr<Mask::State> Mask::element_state(sparse_formats::CsrPattern<Index>&& pattern) {
  auto state = std::make_shared<State>();
  state->seqlen_q = pattern.num_rows;
  state->seqlen_k = pattern.num_cols;
  state->nnz = pattern.nnz();
  state->full = state->nnz == state->seqlen_q * state->seqlen_k;
  if constexpr (std::is_same_v<Index, int32_t>) {
    state->elements32 = std::move(pattern);
  } else if (fits_int32(state->seqlen_k, state->nnz)) {
    state->elements32 = sparse_formats::convert_index<int32_t>(pattern.view());
  } else {
    state->csr = std::move(pattern);
    state->csr_built = true;
  }
  return state;
}

Mask Mask::from_csr(sparse_formats::CsrPattern<int64_t>&& pattern, const std::string& what) {
  sparse_formats::validate(pattern, what);
  return Mask(element_state(std::move(pattern)));
}

std::shared_ptr<Mask::State> Mask::structured_state(int64_t seqlen_q, int64_t seqlen_k, const std::string& what) {
  if (seqlen_k > 0 && seqlen_q > std::numeric_limits<int64_t>::max() / seqlen_k) {
    fail(what, ": seqlen_q x seqlen_k = ", seqlen_q, " x ", seqlen_k, " pairs overflows int64");
  }
  auto state = std::make_shared<State>();
  state->seqlen_q = seqlen_q;
  state->seqlen_k = seqlen_k;
  return state;
}

Mask Mask::from_intervals(sparse_formats::IntervalPattern&& pattern, const std::string& what) {
  sparse_formats::validate(pattern, what);
  auto state = structured_state(pattern.num_rows, pattern.num_cols, what);
  state->nnz = pattern.nnz();
  state->full = state->nnz == state->seqlen_q * state->seqlen_k;
  state->intervals = std::move(pattern);
  return Mask(std::move(state));
}

namespace {

// The attended pairs of a valid block mask: each full block's in-range area plus each partial
// block's set bits (validate keeps the bits past the edges 0). O(blocks + bit words).
int64_t block_pairs(const sparse_formats::BsrMask<int32_t>& mask) {
  const sparse_formats::BsrPatternView<int32_t> view = mask.blocks.view();
  int64_t pairs = 0;
  for (int64_t block_row = 0; block_row < view.num_block_rows(); ++block_row) {
    for (int64_t b = view.block_row_ptr[block_row]; b < view.block_row_ptr[block_row + 1]; ++b) {
      if (mask.kind[static_cast<size_t>(b)] == sparse_formats::BlockKind::full) {
        pairs += view.block_rows_in(block_row) * view.block_cols_in(view.block_col_idx[b]);
      }
    }
  }
  for (const uint64_t word : mask.partial_bits) pairs += __builtin_popcountll(word);
  return pairs;
}

// The bytes of a block mask's arrays: row pointers, block columns, kinds, partial slots and bits.
int64_t block_bytes(const sparse_formats::BsrMask<int32_t>& mask) {
  return static_cast<int64_t>(sizeof(int32_t) * (mask.blocks.block_row_ptr.size() + mask.blocks.block_col_idx.size()) +
                              sizeof(sparse_formats::BlockKind) * mask.kind.size() +
                              sizeof(int64_t) * mask.partial_slot.size() + sizeof(uint64_t) * mask.partial_bits.size());
}

}  // namespace

Mask Mask::from_blocks(sparse_formats::BsrMask<int32_t>&& pattern, const std::string& what) {
  sparse_formats::validate(pattern, what);
  auto state = structured_state(pattern.blocks.num_rows, pattern.blocks.num_cols, what);
  state->nnz = block_pairs(pattern);
  state->full = state->nnz == state->seqlen_q * state->seqlen_k;
  state->blocks = std::move(pattern);
  return Mask(std::move(state));
}

Mask Mask::from_csr(const sparse_formats::CsrPatternView<int64_t>& pattern, const std::string& what) {
  if (pattern.num_rows < 0 || pattern.num_cols < 0 || pattern.row_ptr == nullptr) {
    fail(what, ": a ", pattern.num_rows, " x ", pattern.num_cols, " pattern needs a row_ptr array");
  }
  const int64_t nnz = pattern.nnz();
  if (nnz < 0) fail(what, ": row_ptr[", pattern.num_rows, "] = ", nnz, " must be >= 0");
  sparse_formats::validate(pattern, pattern.num_rows + 1, nnz, what);
  if (fits_int32(pattern.num_cols, nnz)) return Mask(element_state(sparse_formats::convert_index<int32_t>(pattern)));
  sparse_formats::CsrPattern<int64_t> copy(
      pattern.num_rows, pattern.num_cols,
      std::vector<int64_t>(pattern.row_ptr, pattern.row_ptr + pattern.num_rows + 1),
      std::vector<int64_t>(pattern.col_idx, pattern.col_idx + nnz));
  return Mask(element_state(std::move(copy)));
}

Mask Mask::from_csr(const sparse_formats::CsrPatternView<int32_t>& pattern, const std::string& what) {
  if (pattern.num_rows < 0 || pattern.num_cols < 0 || pattern.row_ptr == nullptr) {
    fail(what, ": a ", pattern.num_rows, " x ", pattern.num_cols, " pattern needs a row_ptr array");
  }
  const int64_t nnz = pattern.nnz();
  if (nnz < 0) fail(what, ": row_ptr[", pattern.num_rows, "] = ", nnz, " must be >= 0");
  sparse_formats::validate(pattern, pattern.num_rows + 1, nnz, what);
  return Mask(element_state(sparse_formats::convert_index<int32_t>(pattern)));
}

Mask Mask::from_spec(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k) {
  const auto parsed = sparse_formats::parse_pattern_spec(spec);
  if (parsed.name == "full" && parsed.params.empty()) return full(seqlen_q, seqlen_k);
  if (auto intervals = sparse_formats::make_interval_pattern(parsed, seqlen_q, seqlen_k)) {
    // A block pattern lives as its blocks (13 bytes a block, where its intervals take 16 bytes a
    // row and block run), where the block form's int32 indices can name them.
    const auto block = sparse_formats::block_pattern_size(parsed);
    const int64_t int32_max = std::numeric_limits<int32_t>::max();
    if (block && seqlen_q <= int32_max && seqlen_k <= int32_max) {
      return from_blocks(sparse_formats::intervals_to_bsr_mask<int32_t>(*intervals, block->first, block->second), spec);
    }
    return from_intervals(std::move(*intervals), spec);
  }
  // Where every pair fits int32, the generator writes the int32 form directly (no int64 copy on
  // the way); past it the pairs it makes decide (element_state).
  const int64_t int32_max = std::numeric_limits<int32_t>::max();
  if (seqlen_q >= 0 && seqlen_k >= 0 && (seqlen_k == 0 || seqlen_q <= int32_max / seqlen_k)) {
    auto pattern = sparse_formats::make_pattern<int32_t>(parsed, seqlen_q, seqlen_k);
    sparse_formats::validate(pattern, spec);
    return Mask(element_state(std::move(pattern)));
  }
  return from_csr(sparse_formats::make_pattern<int64_t>(parsed, seqlen_q, seqlen_k), spec);
}

int64_t Mask::seqlen_q() const { return state_->seqlen_q; }
int64_t Mask::seqlen_k() const { return state_->seqlen_k; }
bool Mask::is_full() const { return state_->full; }

int64_t Mask::nnz() const { return state_->nnz; }

MaskForm Mask::form() const {
  if (state_->full) return MaskForm::full;
  if (state_->intervals) return MaskForm::intervals;
  return state_->blocks ? MaskForm::blocks : MaskForm::elements;
}

const sparse_formats::IntervalPattern* Mask::intervals() const {
  return state_->intervals && !state_->full ? &*state_->intervals : nullptr;
}

const sparse_formats::BsrMask<int32_t>* Mask::blocks() const {
  return state_->blocks && !state_->full ? &*state_->blocks : nullptr;
}

const sparse_formats::IntervalPattern* Mask::row_intervals() const {
  if (state_->full) return nullptr;
  if (state_->intervals) return &*state_->intervals;
  if (!state_->blocks) return nullptr;
  std::lock_guard<std::mutex> lock(state_->block_rows_mutex);
  if (!state_->block_rows) state_->block_rows = sparse_formats::bsr_mask_to_intervals(*state_->blocks);
  return &*state_->block_rows;
}

int64_t Mask::memory_bytes() const {
  int64_t bytes = state_->intervals ? state_->intervals->memory_bytes() : 0;
  if (state_->blocks) bytes += block_bytes(*state_->blocks);
  if (state_->elements32) {
    bytes += static_cast<int64_t>(sizeof(int32_t) *
                                  (state_->elements32->row_ptr.size() + state_->elements32->col_idx.size()));
  }
  std::lock_guard<std::mutex> lock(state_->csr_mutex);
  if (state_->csr_built) {
    bytes += static_cast<int64_t>(sizeof(int64_t) * (state_->csr.row_ptr.size() + state_->csr.col_idx.size()));
  }
  std::lock_guard<std::mutex> rows_lock(state_->block_rows_mutex);
  if (state_->block_rows) bytes += state_->block_rows->memory_bytes();
  return bytes;
}

double Mask::density() const {
  const double area = static_cast<double>(state_->seqlen_q) * static_cast<double>(state_->seqlen_k);
  return area > 0.0 ? static_cast<double>(nnz()) / area : 0.0;
}

sparse_formats::CsrPatternView<int64_t> Mask::csr() const {
  std::lock_guard<std::mutex> lock(state_->csr_mutex);
  if (!state_->csr_built) {
    const sparse_formats::IntervalPattern* rows = state_->full ? nullptr : row_intervals();
    if (rows != nullptr) {
      state_->csr = sparse_formats::intervals_to_csr<int64_t>(*rows);
    } else if (state_->elements32) {
      state_->csr = sparse_formats::convert_index<int64_t>(state_->elements32->view());
    } else {
      state_->csr = sparse_formats::full_pattern<int64_t>(state_->seqlen_q, state_->seqlen_k);
    }
    state_->csr_built = true;
  }
  return state_->csr.view();
}

std::optional<sparse_formats::CsrPatternView<int32_t>> Mask::csr32() const {
  if (state_->full || !state_->elements32) return std::nullopt;
  return state_->elements32->view();
}

detail::MaskCache& detail::cache_of(const Mask& mask) { return mask.state_->cache; }

namespace detail {

std::shared_ptr<const schedules::FlashMask> MaskCache::flash(const Mask& mask,
                                                             const schedules::FlashTiles& tiles,
                                                             Pass pass) {
  const FlashKey key{static_cast<int>(pass), tiles.block_q, tiles.block_k, tiles.dkdv_block_q,
                     tiles.dkdv_block_k};
  const auto transposed = pass == Pass::backward ? transposed_intervals(mask) : nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& entry = flash_[key];
  if (!entry) {
    entry = std::make_shared<const schedules::FlashMask>(
        mask.row_intervals() != nullptr
            ? schedules::build_flash_mask(*mask.row_intervals(), transposed.get(), mask.seqlen_q(), mask.seqlen_k(), tiles, pass)
            : with_element_csr(mask, [&](const auto& csr) {
                return schedules::build_flash_mask(csr, mask.seqlen_q(), mask.seqlen_k(), tiles, pass);
              }));
  }
  return entry;
}

std::shared_ptr<const sparse_formats::IntervalPattern> MaskCache::transposed_intervals(const Mask& mask) {
  const sparse_formats::IntervalPattern* rows = mask.row_intervals();
  if (rows == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!transposed_intervals_) {
    // A block mask transposes block by block (no sweep over the rows' intervals); both are canonical.
    transposed_intervals_ = std::make_shared<const sparse_formats::IntervalPattern>(
        mask.blocks() != nullptr ? sparse_formats::bsr_mask_to_intervals(sparse_formats::transpose(*mask.blocks()))
                                 : sparse_formats::transpose(*rows));
  }
  return transposed_intervals_;
}

std::shared_ptr<const schedules::SparseSmallCacheMask> MaskCache::small_cache(const Mask& mask) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!small_cache_) {
    small_cache_ = mask.row_intervals() != nullptr
                       ? std::make_shared<const schedules::SparseSmallCacheMask>(*mask.row_intervals())
                       : with_element_csr(mask, [](const auto& csr) {
                           return std::make_shared<const schedules::SparseSmallCacheMask>(csr);
                         });
  }
  return small_cache_;
}

std::shared_ptr<const schedules::SparseMaskCounts> MaskCache::small_cache_counts(const Mask& mask) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!small_cache_counts_) {
    small_cache_counts_ = mask.row_intervals() != nullptr
                              ? std::make_shared<const schedules::SparseMaskCounts>(*mask.row_intervals())
                              : with_element_csr(mask, [](const auto& csr) {
                                  return std::make_shared<const schedules::SparseMaskCounts>(csr);
                                });
  }
  return small_cache_counts_;
}

std::shared_ptr<const void> MaskCache::find_memo(const MemoKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = memo_.find(key);
  return found != memo_.end() ? found->second : nullptr;
}

std::shared_ptr<const void> MaskCache::store_memo(const MemoKey& key, std::shared_ptr<const void> value) {
  std::lock_guard<std::mutex> lock(mutex_);
  return memo_.emplace(key, std::move(value)).first->second;  // a racing store keeps the first
}

}  // namespace detail
}  // namespace spattn
