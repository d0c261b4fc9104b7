// The streams of a user's ncclGroupStart/End group, joined as NCCL joins them. NCCL runs a
// group as if it were posted on every stream of its calls (NCCL's user guide, "Mixing
// Multiple Streams within the same ncclGroupStart/End() group"; 2.28 enqueue.cc: the first
// stream waits for the others before the launch, all of them for the launch after it):
// work a user queues on any of them after the group sees every call's output, and every
// call sees the work queued on any of them before the group. NCCL does that per
// communicator. The calls topocoll takes out of NCCL's group (schedules run after it closes,
// calls moved to the topology-ordered split, a communicator of its own) would be ordered on
// their own stream only: group_end joins the group's streams around them.
//
// Only the collectives the interposer sees are known: a group's ncclSend/ncclRecv, ncclBcast
// or ncclReduce go to NCCL untouched, and their streams are not joined here.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

namespace topocoll::plugin::interposer {

// A stream and the device it is on (its communicator's, asked when the call is made: by the
// group's end another thread may have destroyed the communicator).
struct GroupStream {
  cudaStream_t stream = nullptr;
  int device = -1;  // -1: the thread's current device
  bool operator==(const GroupStream&) const = default;
};

// What a group's calls showed of their streams until its outermost end.
struct GroupStreamsSeen {
  std::vector<GroupStream> streams;  // each once
  bool moved_to_split = false;       // a call went to the topology-ordered split
  bool lost = false;                 // out of host memory while noting one: incomplete
};

// Adds the stream of a call of the group unless it is there.
void add_group_stream(std::vector<GroupStream>& streams, const GroupStream& s);

// Every stream of `streams` waits for the work issued so far on every other one: the first
// for all the rest, then all the rest for the first (each event recorded on its stream's
// device). Returns the first CUDA error with `error` naming it; cudaSuccess when there is
// nothing to join.
cudaError_t join_group_streams(const std::vector<GroupStream>& streams, std::string* error);

}  // namespace topocoll::plugin::interposer
