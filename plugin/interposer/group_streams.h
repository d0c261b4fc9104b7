// The streams of a user's ncclGroupStart/End group, joined as NCCL joins them. NCCL runs a
// group as if it were posted on every stream of its calls (NCCL's user guide, "Mixing
// Multiple Streams within the same ncclGroupStart/End() group"; 2.28 enqueue.cc: the first
// stream waits for the others before the launch, all of them for the launch after it):
// work a user queues on any of them after the group sees every call's output, and every
// call sees the work queued on any of them before the group. NCCL does that per
// communicator. The calls topocoll takes out of NCCL's group (schedules run after it closes,
// calls moved to the topology-ordered split, a communicator of its own) would be ordered on
// their own stream only: group_end joins the streams of their communicator's calls around
// them.
//
// Only the collectives the interposer serves are known: a group's ncclSend/ncclRecv,
// ncclBroadcast or ncclReduce on the same communicator go to NCCL untouched, and their
// streams are not joined here.
#pragma once

#include <nccl.h>

#include <string>
#include <vector>

namespace topocoll::plugin::interposer {

// A stream of a served communicator's calls in the group, on that communicator's device
// (known to topocoll when the call is made: nothing asks NCCL then).
struct GroupStream {
  ncclComm_t comm = nullptr;  // the user's communicator, also for a call moved to its split
  cudaStream_t stream = nullptr;
  int device = -1;  // -1: the thread's current device
  unsigned long long capture = ~0ull;  // the capture's id (cuda_probe.h stream_capture_id)
  bool operator==(const GroupStream&) const = default;
};

// What a group's served calls showed of their streams until its outermost end.
struct GroupStreamsSeen {
  std::vector<GroupStream> streams;  // each once
  std::vector<ncclComm_t> moved;     // communicators with a call moved to their split
  bool lost = false;                 // out of host memory while noting: incomplete
};

// Whether `s` is captured as the streams of its communicator's earlier calls in the group
// are: all uncaptured or all in one capture, as NCCL requires of one communicator's streams
// in a group (2.28 enqueue.cc ncclPlannerSetCapturingGraph; ncclInvalidUsage otherwise).
bool captured_alike(const GroupStreamsSeen& seen, const GroupStream& s);

// Notes a call of the group (never throws: out of host memory, `lost` is set).
void note_group_call(GroupStreamsSeen& seen, const GroupStream& s, bool moved_to_split) noexcept;

// Whether a communicator has calls on several streams in the group (allocates nothing).
bool any_communicator_on_several_streams(const GroupStreamsSeen& seen) noexcept;

// The streams join_group_streams joins, a list per communicator of `comms` (each once) that
// has more than one: the streams of that communicator's calls, never another's.
std::vector<std::vector<GroupStream>> streams_to_join(const GroupStreamsSeen& seen,
                                                      const std::vector<ncclComm_t>& comms);

// For each communicator of `comms` (given twice, joined once), the streams of its calls in
// the group wait for the work issued so far on one another: the first for all the rest,
// then all the rest for the first, each event recorded on its stream's device. NCCL joins
// each communicator's streams apart: so does this (a process driving several GPUs in one
// group, their streams perhaps captured in graphs of their own, keeps them apart). Returns
// the first CUDA error with `error` naming it; cudaSuccess when nothing needed joining.
cudaError_t join_group_streams(const GroupStreamsSeen& seen, const std::vector<ncclComm_t>& comms,
                               std::string* error);

}  // namespace topocoll::plugin::interposer
