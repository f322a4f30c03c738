// Shared by the tests of the CUDA backend (tests/cuda/cuda_*_test.cpp): the pattern specs every
// test walks, and masks built from them.
#pragma once

#include <spattn/mask.hpp>

#include <sparse_formats/patterns.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace spattn::testing {

// Every pattern at parameters that make it sparse at a few hundred positions, compositions, and
// each pattern with its defaults (documents only on square shapes: rectangles need lengths_k).
// Below 64 positions (the parameters above assume more): each pattern with its defaults, documents
// as one document per position.
inline std::vector<std::string> cuda_pattern_specs(int64_t seqlen_q, int64_t seqlen_k) {
  const bool square = seqlen_q == seqlen_k;
  std::vector<std::string> specs;
  if (std::min(seqlen_q, seqlen_k) >= 64) {
    specs = {"bigbird:block=16,w=1,g=1,r=2,seed=3", "dilated_window:w=6,dilation=3",
             "fixed:stride=32,c=4",                 "global_window:w=8,g=3",
             "prefix_lm:p=40",                      "random:p=0.1,seed=2",
             "random_blocks:block=8,p=0.3,seed=5",  "random_blocks:block_m=13,block_n=48,p=0.4,seed=1",
             "sliding_window:w=16",                 "sliding_window:w=20,causal=1",
             "strided:stride=16",                   "bigbird:block=16 & causal",
             "sliding_window:w=4 | random:p=0.02,seed=9"};
    if (square) specs.push_back("documents:num_docs=3,causal=1");
  }
  for (const auto& info : sparse_formats::list_patterns()) {
    if (info.name != "documents") {
      specs.push_back(info.name);
    } else if (square) {
      specs.push_back(seqlen_q >= 64 ? info.name : "documents:num_docs=" + std::to_string(seqlen_q));
    }
  }
  return specs;
}

inline Mask mask_of(const std::string& spec, int64_t seqlen_q, int64_t seqlen_k) {
  return Mask::from_spec(spec, seqlen_q, seqlen_k);
}

}  // namespace spattn::testing
