// Per-communicator cache of decisions and schedules, keyed by (collective, count, datatype):
// planning (placement order search, schedule generation, cost model) runs once per key,
// later calls with the same key reuse the plan; bounded in bytes (least recently used out). Op and buffers are not part of the key:
// schedules are op-agnostic and correct in and out of place (sched/schedule.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
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

// Memory one plan holds: the schedule's programs for every rank dominate.
std::size_t plan_footprint_bytes(const Plan& plan);

// Plans of one communicator, least recently used first out once their footprints exceed
// the capacity (TOPOCOLL_PLAN_CACHE_BYTES), so a job calling with many sizes does not grow
// without limit. The plan just inserted is always kept, however large.
class PlanCache {
 public:
  static constexpr std::size_t kDefaultCapacityBytes = std::size_t(256) << 20;
  explicit PlanCache(std::size_t capacity_bytes = kDefaultCapacityBytes)
      : capacity_(capacity_bytes) {}

  std::shared_ptr<const Plan> find(const PlanKey& key) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    return it->second->plan;
  }
  // Keeps the first plan stored for a key (two threads may plan the same key at once).
  std::shared_ptr<const Plan> insert(const PlanKey& key, std::shared_ptr<const Plan> plan) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) return it->second->plan;
    const std::size_t bytes = plan ? plan_footprint_bytes(*plan) : 0;
    lru_.push_front({key, std::move(plan), bytes});
    index_.emplace(key, lru_.begin());
    bytes_ += bytes;
    while (bytes_ > capacity_ && lru_.size() > 1) {
      const Entry& oldest = lru_.back();
      bytes_ -= oldest.bytes;
      index_.erase(oldest.key);
      lru_.pop_back();
    }
    return lru_.front().plan;
  }
  void set_capacity_bytes(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    capacity_ = bytes;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
  }
  std::size_t bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  struct Entry {
    PlanKey key;
    std::shared_ptr<const Plan> plan;
    std::size_t bytes = 0;
  };
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::size_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<PlanKey, std::list<Entry>::iterator, PlanKeyHash> index_;
};

}  // namespace topocoll::plugin::interposer
