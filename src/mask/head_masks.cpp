// HeadMasks (spattn/mask.hpp): the mask argument of the attention entry points.
#include <spattn/mask.hpp>

#include <spattn/error.hpp>

#include <algorithm>
#include <utility>

namespace spattn {

HeadMasks::HeadMasks(Mask mask) : masks_{std::move(mask)}, given_(true) {}

HeadMasks::HeadMasks(std::vector<Mask> masks) : masks_(std::move(masks)), given_(true), per_head_(true) {}

std::vector<Mask> HeadMasks::resolve(const char* where, int64_t heads, int64_t seqlen_q, int64_t seqlen_k) const {
  if (per_head_ && static_cast<int64_t>(masks_.size()) != heads) {
    fail(where, ": masks has ", masks_.size(), " masks, q has ", heads, " heads (one mask per query head)");
  }
  if (given_) return masks_;
  // A negative size is the caller's error, reported by its own checks; the full mask is sized 0 then.
  return {Mask::full(std::max<int64_t>(seqlen_q, 0), std::max<int64_t>(seqlen_k, 0))};
}

}  // namespace spattn
