// What the fuzz targets share: a reader that turns the fuzzer's bytes into bounded numbers, and
// `finding`, which reports a wrong result as a crash (libFuzzer and the replay driver both stop on
// abort()). An expected refusal is sparse_formats::FormatError (spattn::InvalidArgument); any other
// exception escapes the target and is a finding too (std::bad_alloc from a header that claims more
// than the file holds, for example).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace spattn_fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "spattn fuzz finding: %s\n", what.c_str());
  std::abort();
}

// Bytes as bounded integers; past the end every read is 0.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return position_ < size_ ? data_[position_++] : 0; }
  bool bit() { return (byte() & 1) != 0; }
  // An integer in [low, high] (high - low < 65536).
  int64_t integer(int64_t low, int64_t high) {
    const auto value = static_cast<int64_t>(byte()) | (static_cast<int64_t>(byte()) << 8);
    return low + value % (high - low + 1);
  }
  // A float in [-1, 1) in steps of 1/128 (the range the test suite's fp32 rule is stated for).
  float value() { return (static_cast<float>(byte()) - 128.0f) / 128.0f; }
  // What is left, as text.
  std::string rest() {
    std::string text(reinterpret_cast<const char*>(data_ + position_), size_ - position_);
    position_ = size_;
    return text;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

}  // namespace spattn_fuzz
