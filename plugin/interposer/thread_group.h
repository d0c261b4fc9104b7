// What one thread has open inside a user's ncclGroupStart/End: the nesting depth, the
// communicators created in the group (their topocoll init runs after the outermost end),
// the served collectives queued until then, the streams of the group's collectives and the
// failure of a served call that fails the group. Each entry of a collective holds its
// communicator's state by shared_ptr: a destroy or abort from another thread while the call
// is queued or running cannot free what the call still uses.
#pragma once

#include <nccl.h>

#include <memory>
#include <optional>
#include <vector>

#include "plugin/interposer/collective_queue.h"
#include "plugin/interposer/comm_config.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/group_streams.h"
#include "plugin/interposer/interposer.h"

namespace topocoll::plugin::interposer {

// A served collective waiting for the outermost ncclGroupEnd (or running now).
struct PendingCollective {
  std::shared_ptr<CommState> state;
  CollectiveCall call;
  std::shared_ptr<const Route> route;
};

// Communicators created inside a user group finish their topocoll init after it closes.
struct PendingInit {
  ncclComm_t comm = nullptr;
  bool blocking = true;
  CommConfigCopy config;  // the user's, or the parent's for a split without one
};

// A split or shrink made inside the group: its handle is NCCL's to write at the group's end.
struct PendingChild {
  ncclComm_t* handle = nullptr;
  std::optional<CommConfigCopy> config;  // the call's, copied: the user may free it
  ncclComm_t parent = nullptr;
};

struct ThreadGroup {
  GroupDepth depth;
  std::vector<PendingChild> children;
  std::vector<PendingInit> inits;
  std::vector<PendingCollective> collectives;
  // The streams of the group's collectives: what group_end joins (group_streams.h).
  GroupStreamsSeen streams;
  // The last failure of a served call of the group that topocoll, not NCCL, returned: what
  // the outermost end returns (fail_users_group).
  ncclResult_t failed = ncclSuccess;
};

inline ThreadGroup& thread_group() {
  thread_local ThreadGroup group;
  return group;
}

}  // namespace topocoll::plugin::interposer
