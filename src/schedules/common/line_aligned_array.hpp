// Slow-memory arrays a schedule owns (small_cache's S, P and dS; the density-adaptive
// small_cache's prepared mask), starting on a 64-byte line. The line model (spattn/io.hpp) takes every array to start on a line; an array
// that does not (malloc gives 16-byte alignment) has every line-sized run of a row straddle two
// lines, so a native run would touch up to twice the lines the ledger counts.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>

namespace spattn::schedules {

inline constexpr std::size_t kLineBytes = 64;

template <typename T>
class LineAlignedArray {
 public:
  explicit LineAlignedArray(std::size_t count)
      : data_(count == 0 ? nullptr
                         : static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t{kLineBytes}))) {
    for (std::size_t i = 0; i < count; ++i) new (data_.get() + i) T{};
  }
  T* data() { return data_.get(); }

 private:
  struct Free {
    void operator()(T* p) const { ::operator delete[](p, std::align_val_t{kLineBytes}); }
  };
  static_assert(std::is_trivially_destructible_v<T>, "LineAlignedArray holds plain values");
  std::unique_ptr<T, Free> data_;
};

// A std::allocator whose arrays start on a 64-byte line (the prepared masks' index arrays).
template <typename T>
struct LineAlignedAllocator {
  using value_type = T;
  LineAlignedAllocator() = default;
  template <typename U>
  explicit LineAlignedAllocator(const LineAlignedAllocator<U>& /*other*/) {}
  T* allocate(std::size_t count) {
    return static_cast<T*>(::operator new[](count * sizeof(T), std::align_val_t{kLineBytes}));
  }
  void deallocate(T* p, std::size_t /*count*/) { ::operator delete[](p, std::align_val_t{kLineBytes}); }
  template <typename U>
  bool operator==(const LineAlignedAllocator<U>& /*other*/) const { return true; }
  template <typename U>
  bool operator!=(const LineAlignedAllocator<U>& /*other*/) const { return false; }
};

}  // namespace spattn::schedules
