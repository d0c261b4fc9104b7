// The objects this plugin has handed to NCCL and not yet taken back (listen comms, send and
// receive comms, requests). Every entry point looks a pointer up here before touching it,
// so a stale, freed, foreign or garbage pointer (a request after its comm was closed, a
// comm closed twice, a comm passed as a request) is ncclInvalidArgument with a WARN rather
// than a use-after-free or a crash. A lookup is one hash probe under one mutex.
//
// An object may name the NCCL context (v11 init's ctx) it was made for, so finalize can take
// back what NCCL never will: a connect NCCL stopped calling (communicator aborted mid-setup).
#pragma once

#include <mutex>
#include <unordered_map>
#include <vector>

namespace topocoll::plugin::socket_net {

enum class LiveKind { Listen, Comm, Request, Connecting };

class LiveObjects {
 public:
  void add(const void* p, LiveKind kind, const void* owner = nullptr) {
    std::lock_guard lock(mutex_);
    objects_[p] = Entry{kind, owner};
  }
  // False when p was not live (already removed): the caller must not free it again.
  bool remove(const void* p) {
    std::lock_guard lock(mutex_);
    const bool removed = objects_.erase(p) > 0;
    release_memory_if_empty();
    return removed;
  }
  bool contains(const void* p, LiveKind kind) const {
    std::lock_guard lock(mutex_);
    auto it = objects_.find(p);
    return it != objects_.end() && it->second.kind == kind;
  }
  // Removes every object of `kind` made for `owner` (not null) and returns them: the caller
  // is now their only holder and frees them.
  std::vector<const void*> take_owned(LiveKind kind, const void* owner) {
    std::vector<const void*> taken;
    if (!owner) return taken;
    std::lock_guard lock(mutex_);
    for (auto it = objects_.begin(); it != objects_.end();) {
      if (it->second.kind == kind && it->second.owner == owner) {
        taken.push_back(it->first);
        it = objects_.erase(it);
      } else {
        ++it;
      }
    }
    release_memory_if_empty();
    return taken;
  }

 private:
  // An empty table gives its bucket array back (a default-constructed one holds no heap
  // memory), so the registry owns none once NCCL has closed everything: unloading the
  // library then leaves nothing behind (see live_objects()).
  void release_memory_if_empty() {
    if (objects_.empty() && objects_.bucket_count() > 1) decltype(objects_)().swap(objects_);
  }

  struct Entry {
    LiveKind kind;
    const void* owner;
  };
  mutable std::mutex mutex_;
  std::unordered_map<const void*, Entry> objects_;
};

// The one registry of this library. Never destroyed, since NCCL's threads may still call in
// while the process exits; it lives in the library's own storage and holds heap memory only
// while objects are live, so NCCL unloading the plugin after its last communicator (dlclose,
// NCCL 2.28 src/plugin/net.cc) and loading it again leaks nothing once everything was
// closed (before v11, a connection attempt NCCL abandoned is never closed: see
// socket_net.h abandon_unfinished).
LiveObjects& live_objects();

}  // namespace topocoll::plugin::socket_net
