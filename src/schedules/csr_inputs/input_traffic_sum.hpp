// Arithmetic on InputTraffic shared by the input-traffic predictions (input_traffic*.cpp).
#pragma once

#include "schedules/csr_inputs/input_traffic.hpp"

#include <cstdint>

namespace spattn::schedules {

inline InputTraffic& operator+=(InputTraffic& a, const InputTraffic& b) {
  a.q += b.q;
  a.k += b.k;
  a.v += b.v;
  return a;
}

inline io::CsrTileWords scaled(io::CsrTileWords words, int64_t times) {
  words.values *= times;
  words.indices *= times;
  words.value_lines *= times;
  words.index_lines *= times;
  return words;
}

inline InputTraffic scaled(InputTraffic traffic, int64_t times) {
  return {scaled(traffic.q, times), scaled(traffic.k, times), scaled(traffic.v, times)};
}

}  // namespace spattn::schedules
