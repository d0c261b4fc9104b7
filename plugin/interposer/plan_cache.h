// Per-communicator cache of decisions and schedules, keyed by (collective, count, datatype):
// planning (placement order search, schedule generation, cost model) runs once per key,
// later calls with the same key reuse the plan. Op and buffers are not part of the key:
// schedules are op-agnostic and correct in and out of place (sched/schedule.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "sched/schedule.h"

namespace topocoll::plugin::interposer {

struct PlanKey {
  sched::Collective collective = sched::Collective::AllReduce;
  int dtype = 0;      // ncclDataType_t
  int64_t count = 0;  // NCCL's count argument
  friend bool operator==(const PlanKey&, const PlanKey&) = default;
};

struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const noexcept {
    uint64_t h = uint64_t(k.count) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t(k.dtype) << 8 | uint64_t(k.collective)) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return std::size_t(h);
  }
};

// Where a call goes.
enum class Route : uint8_t {
  Nccl,          // NCCL on the user's communicator, unchanged
  NcclTopoRing,  // NCCL on the communicator split in topology ring order
  Schedule,      // a topocoll schedule on the NCCL/CUDA backend
};

struct Plan {
  Route route = Route::Nccl;
  std::string algo;    // "nccl", "nccl-topo-ring", or the schedule's generator name
  std::string reason;  // one line: why this route (cost model numbers or the override)
  double predicted_us = 0;  // the chosen route's prediction (0 when not predicted)
  double nccl_us = 0;       // the cost model's NCCL (rank-order ring) estimate
  std::shared_ptr<const sched::Schedule> schedule;  // Route::Schedule only
  std::size_t scratch_bytes = 0;                    // this rank's scratch for the schedule
};

class PlanCache {
 public:
  std::shared_ptr<const Plan> find(const PlanKey& key) const {
    std::lock_guard lock(mutex_);
    auto it = plans_.find(key);
    return it == plans_.end() ? nullptr : it->second;
  }
  // Keeps the first plan stored for a key (two threads may plan the same key at once).
  std::shared_ptr<const Plan> insert(const PlanKey& key, std::shared_ptr<const Plan> plan) {
    std::lock_guard lock(mutex_);
    return plans_.try_emplace(key, std::move(plan)).first->second;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return plans_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans_;
};

}  // namespace topocoll::plugin::interposer
