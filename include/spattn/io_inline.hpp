// Template definitions for io.hpp (included from there; not a public header of its own).
#pragma once

#include <cassert>
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
  buffer.storage_ = std::make_unique<T[]>(static_cast<size_t>(words));
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
  assert(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0);
  assert(row0 + rows <= src.rows_ && col0 + cols <= src.cols_);
  assert(rows == 0 || cols == 0 || dst_offset + (rows - 1) * dst_ld + cols <= dst.words());
  T* out = dst.data() + dst_offset;
  for (int64_t r = 0; r < rows; ++r) {
    const S* in = src.data_ + (row0 + r) * src.row_stride_ + col0 * src.col_stride_;
    T* out_row = out + r * dst_ld;
    if (src.col_stride_ == 1) {
      for (int64_t c = 0; c < cols; ++c) out_row[c] = static_cast<T>(in[c]);
    } else {
      for (int64_t c = 0; c < cols; ++c) out_row[c] = static_cast<T>(in[c * src.col_stride_]);
    }
  }
  if (ledger_ != nullptr) ledger_->add_read(operand, kind, rows * cols);
}

template <typename T, typename S>
void FastMemory::store(Operand operand, const FastBuffer<T>& src, int64_t src_offset,
                       int64_t src_ld, const SlowMatrix<S>& dst, int64_t row0, int64_t col0,
                       int64_t rows, int64_t cols, WordKind kind) {
  assert(row0 >= 0 && col0 >= 0 && rows >= 0 && cols >= 0);
  assert(row0 + rows <= dst.rows_ && col0 + cols <= dst.cols_);
  assert(rows == 0 || cols == 0 || src_offset + (rows - 1) * src_ld + cols <= src.words());
  const T* in = src.data() + src_offset;
  for (int64_t r = 0; r < rows; ++r) {
    S* out = dst.data_ + (row0 + r) * dst.row_stride_ + col0 * dst.col_stride_;
    const T* in_row = in + r * src_ld;
    if (dst.col_stride_ == 1) {
      for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<S>(in_row[c]);
    } else {
      for (int64_t c = 0; c < cols; ++c) out[c * dst.col_stride_] = static_cast<S>(in_row[c]);
    }
  }
  if (ledger_ != nullptr) ledger_->add_write(operand, kind, rows * cols);
}

}  // namespace spattn::io
