// The objects this plugin has handed to NCCL and not yet taken back (listen comms, send and
// receive comms, requests). Every entry point looks a pointer up here before touching it,
// so a stale, freed, foreign or garbage pointer (a request after its comm was closed, a
// comm closed twice, a comm passed as a request) is ncclInvalidArgument with a WARN rather
// than a use-after-free or a crash. A lookup is one hash probe under one mutex.
#pragma once

#include <mutex>
#include <unordered_map>

namespace topocoll::plugin::socket_net {

enum class LiveKind { Listen, Comm, Request, Connecting };

class LiveObjects {
 public:
  void add(const void* p, LiveKind kind) {
    std::lock_guard lock(mutex_);
    objects_[p] = kind;
  }
  // False when p was not live (already removed): the caller must not free it again.
  bool remove(const void* p) {
    std::lock_guard lock(mutex_);
    return objects_.erase(p) > 0;
  }
  bool contains(const void* p, LiveKind kind) const {
    std::lock_guard lock(mutex_);
    auto it = objects_.find(p);
    return it != objects_.end() && it->second == kind;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const void*, LiveKind> objects_;
};

// The one registry of this process.
LiveObjects& live_objects();

}  // namespace topocoll::plugin::socket_net
