// Argument checks shared by validation and the conversions: index-type limits, shapes, block
// sizes and overflow-safe arithmetic. Private to the sparse_formats library.
#pragma once

#include <algorithm>
#include <bitset>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <sparse_formats/bsr.hpp>
#include <sparse_formats/csr.hpp>
#include <sparse_formats/error.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sparse_formats::internal {

template <typename Index>
constexpr int64_t index_max() {
  return static_cast<int64_t>(std::numeric_limits<Index>::max());
}

template <typename Index>
const char* index_name() {
  static_assert(std::is_same_v<Index, int32_t> || std::is_same_v<Index, int64_t>,
                "Index is int32_t or int64_t");
  return std::is_same_v<Index, int32_t> ? "int32" : "int64";
}

// Throws unless value <= max(Index). `context` names the function or argument, `field` the
// quantity ("num_cols", "nnz").
template <typename Index>
void check_fits(const std::string& context, const char* field, int64_t value) {
  if (value > index_max<Index>()) {
    fail(context, ": ", field, " = ", value, " does not fit the ", index_name<Index>(),
         " index type (max ", index_max<Index>(), ")");
  }
}

// A shape is valid for Index when both extents are >= 0 and fit Index (so that the transpose,
// whose columns are the rows, is representable too).
template <typename Index>
void check_shape(const std::string& context, int64_t num_rows, int64_t num_cols) {
  if (num_rows < 0) fail(context, ": num_rows = ", num_rows, " is negative");
  if (num_cols < 0) fail(context, ": num_cols = ", num_cols, " is negative");
  check_fits<Index>(context, "num_rows", num_rows);
  check_fits<Index>(context, "num_cols", num_cols);
}

// A view's pointers are usable (a null row_ptr would otherwise be read as row_ptr[0]); the rest of
// a view is trusted, see validate().
template <typename Index>
void check_view(const std::string& context, const CsrPatternView<Index>& view) {
  check_shape<Index>(context, view.num_rows, view.num_cols);
  if (view.row_ptr == nullptr) fail(context, ": row_ptr is null");
  if (view.nnz() > 0 && view.col_idx == nullptr) {
    fail(context, ": col_idx is null but row_ptr[", view.num_rows, "] = ", view.nnz());
  }
}

inline void check_block_sizes(const std::string& context, int64_t block_m, int64_t block_n) {
  if (block_m < 1) fail(context, ": block_m = ", block_m, " must be >= 1");
  if (block_n < 1) fail(context, ": block_n = ", block_n, " must be >= 1");
}

// a * b for a, b >= 0, or a FormatError naming both factors when the product overflows int64.
inline int64_t checked_mul(const std::string& context, const char* a_name, int64_t a,
                           const char* b_name, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    fail(context, ": ", a_name, " * ", b_name, " = ", a, " * ", b, " overflows int64");
  }
  return a * b;
}

// ceil(extent / block) without the overflow of (extent + block - 1) for extents near INT64_MAX.
inline int64_t blocks_along(int64_t extent, int64_t block) {
  return extent / block + (extent % block != 0 ? 1 : 0);
}

// The array lengths of a block structure agree with its shape (the contents are trusted, see
// validate()), so that walking it cannot read out of bounds.
template <typename Index>
void check_block_sizes_of(const std::string& context, const BsrPattern<Index>& blocks) {
  check_block_sizes(context, blocks.block_m, blocks.block_n);
  check_shape<Index>(context, blocks.num_rows, blocks.num_cols);
  const int64_t num_block_rows = blocks_along(blocks.num_rows, blocks.block_m);
  if (blocks.block_row_ptr.size() != static_cast<std::size_t>(num_block_rows) + 1) {
    fail(context, ": block_row_ptr has ", blocks.block_row_ptr.size(),
         " entries, expected num_block_rows + 1 = ", static_cast<uint64_t>(num_block_rows) + 1);
  }
  if (static_cast<int64_t>(blocks.block_row_ptr.back()) != blocks.num_blocks()) {
    fail(context, ": block_row_ptr[", num_block_rows, "] = ", blocks.block_row_ptr.back(),
         " but block_col_idx has ", blocks.num_blocks(), " entries");
  }
}

// The same for a mask, plus kind / partial_slot / partial_bits lengths. Returns the number of
// partial blocks.
template <typename Index>
int64_t check_mask_sizes(const std::string& context, const BsrMask<Index>& mask) {
  check_block_sizes_of(context, mask.blocks);
  const std::size_t num_blocks = mask.blocks.block_col_idx.size();
  if (mask.kind.size() != num_blocks || mask.partial_slot.size() != num_blocks) {
    fail(context, ": kind has ", mask.kind.size(), " and partial_slot ", mask.partial_slot.size(),
         " entries, expected num_blocks = ", num_blocks);
  }
  int64_t num_partial = 0;
  for (const BlockKind kind : mask.kind) num_partial += kind == BlockKind::partial ? 1 : 0;
  const int64_t area =
      checked_mul(context, "block_m", mask.blocks.block_m, "block_n", mask.blocks.block_n);
  const int64_t words =
      checked_mul(context, "num_partial", num_partial, "words_per_block", blocks_along(area, 64));
  if (mask.partial_bits.size() != static_cast<std::size_t>(words)) {
    fail(context, ": partial_bits has ", mask.partial_bits.size(), " words, expected ", words);
  }
  return num_partial;
}

// The same for a valued BSR matrix: values holds num_blocks * block_m * block_n entries.
template <typename Index, typename Value>
void check_matrix_sizes(const std::string& context, const BsrMatrix<Index, Value>& bsr) {
  check_block_sizes_of(context, bsr.blocks);
  const int64_t area =
      checked_mul(context, "block_m", bsr.blocks.block_m, "block_n", bsr.blocks.block_n);
  const int64_t expected =
      checked_mul(context, "num_blocks", bsr.blocks.num_blocks(), "block_m * block_n", area);
  if (bsr.values.size() != static_cast<std::size_t>(expected)) {
    fail(context, ": values has ", bsr.values.size(), " entries, expected ", expected);
  }
}

inline std::size_t to_size(int64_t n) { return static_cast<std::size_t>(n); }

// ---- allocations sized by a shape ---------------------------------------------------------------
// Most allocations here are sized by what the input holds (its entries, blocks, values). Some are
// sized by a shape or block size alone (num_rows + 1 row offsets of a result with few entries,
// num_rows * num_cols of a dense result, block_m * block_n bits of a partial block): those go
// through allocate / resize_checked, so that a shape the machine cannot hold is a FormatError
// naming the argument, the size asked for and the limit, not a bare std::bad_alloc.

// The limit: this machine's physical memory (or INT64_MAX where it cannot be queried). Past it an
// allocation can only fail, or, with overcommit, get the process killed while it is filled.
int64_t memory_limit_bytes();

// "<count> x <item_bytes> bytes = <product> bytes" ("more than 2^63 bytes" where it overflows).
std::string bytes_text(int64_t count, int64_t item_bytes);

// `what` names the array and the argument its size comes from, e.g. "row_ptr (num_cols + 1 =
// 4097 offsets)": a string, or a callable returning one, called only to build an error (the
// checks run per block in some conversions, where formatting every time would cost more than the
// conversion).
template <typename What>
std::string describe(const What& what) {
  if constexpr (std::is_invocable_v<const What&>) {
    return what();
  } else {
    return std::string(what);
  }
}

template <typename T, typename What>
[[noreturn]] void fail_allocation(std::string_view context, const What& what, int64_t count,
                                  const char* why) {
  fail(context, ": ", describe(what), " needs ", bytes_text(count, static_cast<int64_t>(sizeof(T))),
       ", ", why, " the limit of ", memory_limit_bytes(), " bytes (physical memory)");
}

// Throws unless `count` values of T (count >= 0) fit the limit.
template <typename T, typename What>
void check_allocation(std::string_view context, const What& what, int64_t count) {
  if (count > memory_limit_bytes() / static_cast<int64_t>(sizeof(T))) {
    fail_allocation<T>(context, what, count, "more than");
  }
}

// `vector.resize(count, value)` after check_allocation; an allocator failure below the limit is
// reported the same way.
template <typename T, typename What>
void resize_checked(std::vector<T>& vector, int64_t count, std::string_view context,
                    const What& what, T value = T{}) {
  check_allocation<T>(context, what, count);
  try {
    vector.resize(to_size(count), value);
  } catch (const std::bad_alloc&) {
    fail_allocation<T>(context, what, count, "which the allocator refused (std::bad_alloc) below");
  }
}

template <typename T, typename What>
std::vector<T> allocate(std::string_view context, const What& what, int64_t count, T value = T{}) {
  std::vector<T> vector;
  resize_checked(vector, count, context, what, value);
  return vector;
}

// n + 1 for a count n >= 0, INT64_MAX for INT64_MAX (a legal int64 extent; its n + 1 offsets are
// refused by the allocation check all the same, and the messages print n + 1 as uint64_t).
inline int64_t saturating_plus_one(int64_t n) {
  return n < std::numeric_limits<int64_t>::max() ? n + 1 : n;
}

// CsrPattern<Index>::empty(num_rows, num_cols) with its row offsets allocated as above; `rows`
// names where num_rows came from ("num_rows", or "num_cols" for a transpose).
template <typename Index>
CsrPattern<Index> empty_pattern(std::string_view context, int64_t num_rows, int64_t num_cols,
                                const char* rows = "num_rows") {
  const auto what = [&] {
    return detail::concat("row_ptr (", rows, " + 1 = ", static_cast<uint64_t>(num_rows) + 1,
                          " offsets)");
  };
  return CsrPattern<Index>(num_rows, num_cols,
                           allocate<Index>(context, what, saturating_plus_one(num_rows)), {});
}

template <typename Value>
bool is_finite(Value v) {
  return std::isfinite(static_cast<double>(v));
}

// Number of set bits in [begin, end) of a bit set stored little-endian in 64-bit words.
inline int64_t count_bits(const uint64_t* words, int64_t begin, int64_t end) {
  int64_t count = 0;
  while (begin < end) {
    const int64_t word = begin / 64;
    const int64_t offset = begin % 64;
    const int64_t width = std::min<int64_t>(64 - offset, end - begin);
    uint64_t bits = words[word] >> offset;
    if (width < 64) bits &= (uint64_t{1} << width) - 1;
    count += static_cast<int64_t>(std::bitset<64>(bits).count());
    begin += width;
  }
  return count;
}

// The first set bit in [begin, end), or -1.
inline int64_t first_set_bit(const uint64_t* words, int64_t begin, int64_t end) {
  while (begin < end) {
    const int64_t word = begin / 64;
    const int64_t offset = begin % 64;
    const int64_t width = std::min<int64_t>(64 - offset, end - begin);
    uint64_t bits = words[word] >> offset;
    if (width < 64) bits &= (uint64_t{1} << width) - 1;
    if (bits != 0) {
      int64_t lowest = 0;
      while (((bits >> lowest) & 1u) == 0) ++lowest;
      return begin + lowest;
    }
    begin += width;
  }
  return -1;
}

// Calls visit(bit) for every set bit in [begin, end), in increasing order, a word at a time.
template <typename Visit>
void for_each_set_bit(const uint64_t* words, int64_t begin, int64_t end, Visit&& visit) {
  while (begin < end) {
    const int64_t offset = begin % 64;
    const int64_t width = std::min<int64_t>(64 - offset, end - begin);
    uint64_t bits = words[begin / 64] >> offset;
    if (width < 64) bits &= (uint64_t{1} << width) - 1;
    while (bits != 0) {
      const uint64_t lowest = bits & (~bits + 1);
      visit(begin + static_cast<int64_t>(std::bitset<64>(lowest - 1).count()));
      bits ^= lowest;
    }
    begin += width;
  }
}

inline bool test_bit(const uint64_t* words, int64_t bit) {
  return ((words[bit / 64] >> (bit % 64)) & 1u) != 0;
}

inline void set_bit(uint64_t* words, int64_t bit) { words[bit / 64] |= uint64_t{1} << (bit % 64); }

}  // namespace sparse_formats::internal
