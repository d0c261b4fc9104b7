// Per-communicator cache of routing decisions (plugin/interposer/route_decision.h) and their
// schedules, keyed by the call (collective, count, datatype): deciding (placement order
// search, schedule generation, cost model) runs once per key, later calls with the same key
// reuse the route; bounded in bytes (least recently used out). Op and buffers are not part
// of the key: schedules are op-agnostic and correct in and out of place (sched/schedule.h).
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

struct CallKey {
  sched::Collective collective = sched::Collective::AllReduce;
  int dtype = 0;      // ncclDataType_t
  int64_t count = 0;  // NCCL's count argument
  friend bool operator==(const CallKey&, const CallKey&) = default;
};

struct CallKeyHash {
  std::size_t operator()(const CallKey& k) const noexcept {
    uint64_t h = uint64_t(k.count) * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t(k.dtype) << 8 | uint64_t(k.collective)) + 0x632BE59BD9B4E019ull + (h << 6) + (h >> 2);
    return std::size_t(h);
  }
};

// Where a call goes.
enum class RouteTarget : uint8_t {
  Nccl,          // NCCL on the user's communicator, unchanged
  NcclTopoRing,  // NCCL on the communicator split in topology ring order
  Schedule,      // a topocoll schedule on the NCCL/CUDA backend
};

// The decision for one call: where it goes, why, and the schedule when it is topocoll's.
struct Route {
  RouteTarget target = RouteTarget::Nccl;
  std::string algo;    // "nccl", "nccl-topo-ring", or the schedule's generator name
  std::string reason;  // one line: why this route (cost model numbers or the override)
  double predicted_us = 0;  // the chosen route's prediction (0 when not predicted)
  double nccl_us = 0;       // the cost model's NCCL (rank-order ring) estimate
  std::shared_ptr<const sched::Schedule> schedule;  // RouteTarget::Schedule only
  std::size_t scratch_bytes = 0;                    // this rank's scratch for the schedule
};

// Memory one route holds: its schedule's programs for every rank dominate.
std::size_t route_footprint_bytes(const Route& route);

// Routes of one communicator, least recently used first out once their footprints exceed
// the capacity (TOPOCOLL_PLAN_CACHE_BYTES), so a job calling with many sizes does not grow
// without limit. The route just inserted is always kept, however large.
class CallRouteCache {
 public:
  static constexpr std::size_t kDefaultCapacityBytes = std::size_t(256) << 20;
  explicit CallRouteCache(std::size_t capacity_bytes = kDefaultCapacityBytes)
      : capacity_(capacity_bytes) {}

  std::shared_ptr<const Route> find(const CallKey& key) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);  // most recent first
    return it->second->route;
  }
  // Keeps the first route stored for a key (two threads may decide the same key at once).
  std::shared_ptr<const Route> insert(const CallKey& key, std::shared_ptr<const Route> route) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(key); it != index_.end()) return it->second->route;
    const std::size_t bytes = route ? route_footprint_bytes(*route) : 0;
    lru_.push_front({key, std::move(route), bytes});
    index_.emplace(key, lru_.begin());
    bytes_ += bytes;
    while (bytes_ > capacity_ && lru_.size() > 1) {
      const Entry& oldest = lru_.back();
      bytes_ -= oldest.bytes;
      index_.erase(oldest.key);
      lru_.pop_back();
    }
    return lru_.front().route;
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
    CallKey key;
    std::shared_ptr<const Route> route;
    std::size_t bytes = 0;
  };
  mutable std::mutex mutex_;
  std::size_t capacity_;
  std::size_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<CallKey, std::list<Entry>::iterator, CallKeyHash> index_;
};

}  // namespace topocoll::plugin::interposer
