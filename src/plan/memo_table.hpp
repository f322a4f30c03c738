// A bounded, locked table of values the planner computes from their key alone (the dense problem's
// costs and switches, which every dense plan of a shape asks for again). Private to src/plan.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace spattn::plan_detail {

template <typename Key, typename Value>
class MemoTable {
 public:
  // The value kept for `key`, else compute() (outside the lock, so that threads planning other
  // shapes do not wait) kept and returned; two threads racing on one key keep the first.
  template <typename Compute>
  Value get(const Key& key, Compute&& compute) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = table_.find(key);
      if (found != table_.end()) return found->second;
    }
    Value value = compute();
    std::lock_guard<std::mutex> lock(mutex_);
    if (table_.size() >= kMaxEntries) table_.clear();  // many distinct keys: start over rather than grow
    return table_.emplace(key, std::move(value)).first->second;
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<Key, Value> table_;
};

}  // namespace spattn::plan_detail
