// Template definitions for io.hpp (included from there; not a public header of its own).
#pragma once

#include <algorithm>
#include <cassert>
#include <memory>
#include <type_traits>
#include <string>
#include <utility>

namespace spattn::io {

template <typename T>
FastBuffer<T>& FastBuffer<T>::operator=(FastBuffer&& other) noexcept {
  if (this != &other) {
    release();
    storage_ = std::move(other.storage_);
    words_ = other.words_;
    owner_ = other.owner_;
    other.words_ = 0;
    other.owner_ = nullptr;
  }
  return *this;
}

template <typename T>
void FastBuffer<T>::release() {
  if (owner_ != nullptr) owner_->release(words_);
  owner_ = nullptr;
  words_ = 0;
  storage_.reset();
}

// One 16-bit element as float, and one float rounded to nearest even into 16 bits.
inline float widen_one(Storage storage, uint16_t bits) {
  return storage == Storage::bf16 ? to_float(bfloat16_t{bits}) : to_float(half_t{bits});
}
inline uint16_t narrow_one(Storage storage, float value) {
  return storage == Storage::bf16 ? to_bfloat16(value).bits : to_half(value).bits;
}

// A float view's 16-bit elements [count of them, `stride` apart] into `out` of any type.
template <typename T>
void widen_into(Storage storage, const uint16_t* in, int64_t stride, int64_t count, T* out) {
  if constexpr (std::is_same_v<T, float>) {
    widen_16bit(storage, in, stride, count, out);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(widen_one(storage, in[i * stride]));
  }
}
// `count` words of any type rounded into a float view's 16-bit elements, `stride` apart.
template <typename T>
void narrow_from(Storage storage, const T* in, int64_t count, uint16_t* out, int64_t stride) {
  if constexpr (std::is_same_v<T, float>) {
    narrow_16bit(storage, in, count, out, stride);
  } else {
    for (int64_t i = 0; i < count; ++i) out[i * stride] = narrow_one(storage, static_cast<float>(in[i]));
  }
}

[[noreturn]] void throw_capacity_exceeded(const std::string& schedule, const char* what,
                                          int64_t words, int64_t resident, int64_t capacity);

template <typename T>
FastBuffer<T> FastMemory::allocate(int64_t words, const char* what) {
  assert(words >= 0);
  if (resident_ + words > capacity_) {
    throw_capacity_exceeded(schedule_, what, words, resident_, capacity_);
  }
  FastBuffer<T> buffer;
  // Value-initialized: a fresh buffer reads as zeros, so accumulators need no extra pass.
  static_assert(std::is_trivially_destructible_v<T>, "fast buffers hold plain words");
  T* storage = static_cast<T*>(
      ::operator new[](static_cast<size_t>(words) * sizeof(T), std::align_val_t{kFastBufferAlignment}));
  std::uninitialized_value_construct_n(storage, static_cast<size_t>(words));
  buffer.storage_.reset(storage);
  buffer.words_ = words;
  buffer.owner_ = this;
  resident_ += words;
  if (ledger_ != nullptr) ledger_->note_resident(resident_);
  return buffer;
}

template <typename S, typename T>
void FastMemory::load(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0,
                      int64_t rows, int64_t cols, FastBuffer<T>& dst, int64_t dst_offset,
                      int64_t dst_ld, WordKind kind) {
  load_tile(operand, src, row0, col0, rows, cols, dst, dst_offset, dst_ld, kind, false);
}

template <typename S, typename T>
void FastMemory::load_continued(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0,
                                int64_t rows, int64_t cols, FastBuffer<T>& dst, int64_t dst_offset,
                                int64_t dst_ld, WordKind kind) {
  load_tile(operand, src, row0, col0, rows, cols, dst, dst_offset, dst_ld, kind, true);
}

template <typename S, typename T>
void FastMemory::load_tile(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0, int64_t rows,
                           int64_t cols, FastBuffer<T>& dst, int64_t dst_offset, int64_t dst_ld, WordKind kind,
                           bool continued) {
  assert(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0);
  assert(row0 + rows <= src.rows_ && col0 + cols <= src.cols_);
  assert(rows == 0 || cols == 0 || dst_offset + (rows - 1) * dst_ld + cols <= dst.words());
  T* out = dst.data() + dst_offset;
  if (src.is_csr_) {
    load_csr(operand, src, row0, col0, rows, cols, out, dst_ld);
    return;
  }
  if (src.storage_ != Storage::native) {
    for (int64_t r = 0; r < rows; ++r) {
      widen_into(src.storage_, src.bits_ + (row0 + r) * src.row_stride_ + col0 * src.col_stride_, src.col_stride_,
                 cols, out + r * dst_ld);
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) {
      const S* in = src.data_ + (row0 + r) * src.row_stride_ + col0 * src.col_stride_;
      T* out_row = out + r * dst_ld;
      if (src.col_stride_ == 1) {
        for (int64_t c = 0; c < cols; ++c) out_row[c] = static_cast<T>(in[c]);
      } else {
        for (int64_t c = 0; c < cols; ++c) out_row[c] = static_cast<T>(in[c * src.col_stride_]);
      }
    }
  }
  if (counted()) {
    const int64_t lines = continued ? src.continued_tile_lines(row0, col0, rows, cols, line_words())
                                    : src.tile_lines(row0, col0, rows, cols, line_words());
    count_read(operand, kind, rows * cols, lines);
  }
}

template <typename S, typename T>
const T* FastMemory::read_tile(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0,
                               int64_t rows, int64_t cols, FastBuffer<T>& dst, int64_t dst_offset,
                               int64_t dst_ld, WordKind kind) {
  if constexpr (std::is_same_v<std::remove_const_t<S>, T>) {
    if (!src.is_csr_ && src.storage_ == Storage::native && src.col_stride_ == 1 && src.row_stride_ == dst_ld) {
      assert(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0);
      assert(row0 + rows <= src.rows_ && col0 + cols <= src.cols_);
      assert(rows == 0 || cols == 0 || dst_offset + (rows - 1) * dst_ld + cols <= dst.words());
      if (counted()) {
        count_read(operand, kind, rows * cols, src.tile_lines(row0, col0, rows, cols, line_words()));
      }
      return src.data_ + row0 * src.row_stride_ + col0;
    }
  }
  load(operand, src, row0, col0, rows, cols, dst, dst_offset, dst_ld, kind);
  return dst.data() + dst_offset;
}

template <typename S, typename T>
inline void FastMemory::load_word(Operand operand, const SlowMatrix<S>& src, int64_t row, int64_t col,
                                  FastBuffer<T>& dst, int64_t dst_offset, WordKind kind) {
  if (src.is_csr_) {
    load(operand, src, row, col, 1, 1, dst, dst_offset, 1, kind);
    return;
  }
  assert(row >= 0 && col >= 0 && row < src.rows_ && col < src.cols_ && dst_offset < dst.words());
  const int64_t at = row * src.row_stride_ + col * src.col_stride_;
  if (src.storage_ != Storage::native) {
    dst.data()[dst_offset] = static_cast<T>(widen_one(src.storage_, src.bits_[at]));
  } else {
    dst.data()[dst_offset] = static_cast<T>(src.data_[at]);
  }
  count_read(operand, kind, 1, 1);
}

template <typename S, typename T>
inline void FastMemory::load_run(Operand operand, const SlowMatrix<S>& src, int64_t begin, int64_t count,
                                 FastBuffer<T>& dst, int64_t dst_offset, WordKind kind) {
  assert(!src.is_csr_ && src.cols_ == 1 && src.row_stride_ == 1);
  assert(begin >= 0 && count >= 0 && begin + count <= src.rows_ && dst_offset + count <= dst.words());
  T* out = dst.data() + dst_offset;
  if (src.storage_ != Storage::native) {
    widen_into(src.storage_, src.bits_ + begin, 1, count, out);
  } else {
    const S* in = src.data_ + begin;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<T>(in[i]);
  }
  if (counted()) count_read(operand, kind, count, segment_lines(begin, count, line_words()));
}

template <typename T, typename S>
inline void FastMemory::store_run(Operand operand, const FastBuffer<T>& src, int64_t src_offset,
                                  const SlowMatrix<S>& dst, int64_t begin, int64_t count, WordKind kind) {
  assert(!dst.is_csr_ && dst.cols_ == 1 && dst.row_stride_ == 1);
  assert(begin >= 0 && count >= 0 && begin + count <= dst.rows_ && src_offset + count <= src.words());
  const T* in = src.data() + src_offset;
  if (dst.storage_ != Storage::native) {
    narrow_from(dst.storage_, in, count, dst.bits_ + begin, 1);
  } else {
    S* out = dst.data_ + begin;
    for (int64_t i = 0; i < count; ++i) out[i] = static_cast<S>(in[i]);
  }
  if (counted()) count_write(operand, kind, count, segment_lines(begin, count, line_words()));
}

template <typename T, typename S>
inline void FastMemory::store_word(Operand operand, const FastBuffer<T>& src, int64_t src_offset,
                                   const SlowMatrix<S>& dst, int64_t row, int64_t col, WordKind kind) {
  assert(row >= 0 && col >= 0 && row < dst.rows_ && col < dst.cols_ && src_offset < src.words());
  assert(!dst.is_csr_);  // CSR views are read-only inputs
  const int64_t at = row * dst.row_stride_ + col * dst.col_stride_;
  if (dst.storage_ != Storage::native) {
    dst.bits_[at] = narrow_one(dst.storage_, static_cast<float>(src.data()[src_offset]));
  } else {
    dst.data_[at] = static_cast<S>(src.data()[src_offset]);
  }
  count_write(operand, kind, 1, 1);
}

// The CSR reader of io.hpp's counting rule, counting each word as it reads it (csr_tile_words is
// the independent formula the predictions use).
template <typename S, typename T>
void FastMemory::load_csr(Operand operand, const SlowMatrix<S>& src, int64_t row0, int64_t col0,
                          int64_t rows, int64_t cols, T* out, int64_t dst_ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[r * dst_ld + c] = T{};
  }
  if (rows == 0 || cols == 0) return;
  const bool transposed = src.csr_transposed_;
  // The stored tile: rows [first_row, first_row + num_rows), columns [first_col, end_col).
  const int64_t first_row = transposed ? col0 : row0;
  const int64_t num_rows = transposed ? cols : rows;
  const int64_t first_col = transposed ? row0 : col0;
  const int64_t end_col = first_col + (transposed ? rows : cols);
  const int64_t* row_ptr = src.csr_.pattern.row_ptr;
  const int64_t* col_idx = src.csr_.pattern.col_idx;
  const auto* values = src.csr_.values;
  const int64_t line = line_words();
  int64_t value_words = 0;
  int64_t index_words = num_rows + 1;  // row_ptr[first_row .. first_row + num_rows]
  // Lines: the row pointers' run, and per stored row the run of col_idx positions it reads (from
  // its first probe or scanned index to its last) and the run of values it reads.
  int64_t value_lines = 0;
  int64_t index_lines = segment_lines(first_row, num_rows + 1, line);
  for (int64_t r = 0; r < num_rows; ++r) {
    const int64_t end = row_ptr[first_row + r + 1];
    int64_t p = row_ptr[first_row + r];
    int64_t first_index = end, last_index = -1;  // col_idx positions read
    const auto read_index = [&](int64_t position) {
      ++index_words;
      first_index = std::min(first_index, position);
      last_index = std::max(last_index, position);
      return col_idx[position];
    };
    if (first_col > 0 && p < end) {
      // Branch-free lower bound: ceil(log2 L) + 1 probes whatever the data.
      int64_t length = end - p;
      while (length > 1) {
        const int64_t half = length / 2;
        if (read_index(p + half) < first_col) p += half;
        length -= half;
      }
      if (read_index(p) < first_col) ++p;
    }
    const int64_t first_value = p;
    for (; p < end; ++p) {
      const int64_t col = read_index(p);
      if (col >= end_col) break;  // the stop word
      ++value_words;
      const int64_t a = r, b = col - first_col;  // stored (row, column) within the tile
      out[(transposed ? b : a) * dst_ld + (transposed ? a : b)] = static_cast<T>(values[p]);
    }
    if (last_index >= 0) index_lines += segment_lines(first_index, last_index - first_index + 1, line);
    value_lines += segment_lines(first_value, p - first_value, line);
  }
  if (ledger_ != nullptr) {
    ledger_->add_read(operand, WordKind::value, value_words);
    ledger_->add_read(operand, WordKind::index, index_words);
    ledger_->add_read_lines(operand, WordKind::value, value_lines);
    ledger_->add_read_lines(operand, WordKind::index, index_lines);
  }
}

template <typename T, typename S>
void FastMemory::store(Operand operand, const FastBuffer<T>& src, int64_t src_offset,
                       int64_t src_ld, const SlowMatrix<S>& dst, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols, WordKind kind) {
  assert(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0);
  assert(row0 + rows <= dst.rows_ && col0 + cols <= dst.cols_);
  assert(rows == 0 || cols == 0 || src_offset + (rows - 1) * src_ld + cols <= src.words());
  assert(!dst.is_csr_);  // CSR views are read-only inputs
  const T* in = src.data() + src_offset;
  for (int64_t r = 0; r < rows; ++r) {
    const T* in_row = in + r * src_ld;
    const int64_t at = (row0 + r) * dst.row_stride_ + col0 * dst.col_stride_;
    if (dst.storage_ != Storage::native) {
      narrow_from(dst.storage_, in_row, cols, dst.bits_ + at, dst.col_stride_);
    } else if (dst.col_stride_ == 1) {
      for (int64_t c = 0; c < cols; ++c) dst.data_[at + c] = static_cast<S>(in_row[c]);
    } else {
      for (int64_t c = 0; c < cols; ++c) dst.data_[at + c * dst.col_stride_] = static_cast<S>(in_row[c]);
    }
  }
  if (counted()) count_write(operand, kind, rows * cols, dst.tile_lines(row0, col0, rows, cols, line_words()));
}

}  // namespace spattn::io
