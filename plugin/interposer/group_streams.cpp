#include "plugin/interposer/group_streams.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <new>
#include <utility>

#include "plugin/interposer/device_guard.h"

namespace topocoll::plugin::interposer {
namespace {

// An event recorded on `s` (its device current), for others to wait on; destroyed by the
// caller once they wait (CUDA keeps what is pending).
cudaError_t record(const GroupStream& s, CurrentDeviceGuard& device, cudaEvent_t* event) {
  device.use(s.device);
  if (const cudaError_t e = cudaEventCreateWithFlags(event, cudaEventDisableTiming); e != cudaSuccess) {
    *event = nullptr;
    return e;
  }
  return cudaEventRecord(*event, s.stream);
}

cudaError_t wait(const GroupStream& s, CurrentDeviceGuard& device, cudaEvent_t event) {
  device.use(s.device);
  return cudaStreamWaitEvent(s.stream, event, 0);
}

// The streams of one communicator's calls joined (see join_group_streams).
cudaError_t join_one(const std::vector<GroupStream>& streams, CurrentDeviceGuard& device, const char** what) {
  std::vector<cudaEvent_t> events;
  cudaError_t failed = cudaSuccess;
  auto check = [&](cudaError_t e, const char* call) {
    if (e != cudaSuccess && failed == cudaSuccess) failed = e, *what = call;
    return e == cudaSuccess;
  };
  const GroupStream& hub = streams.front();
  for (std::size_t i = 1; i < streams.size(); ++i) {
    cudaEvent_t e = nullptr;
    const bool recorded = check(record(streams[i], device, &e), "cudaEventRecord");
    if (e) events.push_back(e);
    if (recorded) check(wait(hub, device, e), "cudaStreamWaitEvent");
  }
  cudaEvent_t from_hub = nullptr;
  if (check(record(hub, device, &from_hub), "cudaEventRecord"))
    for (std::size_t i = 1; i < streams.size(); ++i) check(wait(streams[i], device, from_hub), "cudaStreamWaitEvent");
  if (from_hub) events.push_back(from_hub);
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  return failed;
}

// The same stream of the same communicator (its capture as first seen).
bool same_stream(const GroupStream& a, const GroupStream& b) {
  return a.comm == b.comm && a.stream == b.stream && a.device == b.device;
}

}  // namespace

bool captured_alike(const GroupStreamsSeen& seen, const GroupStream& s) {
  // NCCL looks at a stream once, when the group first has it (planner->streams).
  if (std::any_of(seen.streams.begin(), seen.streams.end(), [&](const GroupStream& t) { return same_stream(t, s); }))
    return true;
  return std::all_of(seen.streams.begin(), seen.streams.end(),
                     [&](const GroupStream& t) { return t.comm != s.comm || t.capture == s.capture; });
}

void note_group_call(GroupStreamsSeen& seen, const GroupStream& s, bool moved_to_split) noexcept {
  try {
    if (std::none_of(seen.streams.begin(), seen.streams.end(), [&](const GroupStream& t) { return same_stream(t, s); }))
      seen.streams.push_back(s);
    if (moved_to_split && std::find(seen.moved.begin(), seen.moved.end(), s.comm) == seen.moved.end())
      seen.moved.push_back(s.comm);
  } catch (const std::bad_alloc&) {
    seen.lost = true;
  }
}

bool any_communicator_on_several_streams(const GroupStreamsSeen& seen) noexcept {
  for (std::size_t i = 0; i < seen.streams.size(); ++i)
    for (std::size_t j = i + 1; j < seen.streams.size(); ++j)
      if (seen.streams[i].comm == seen.streams[j].comm) return true;
  return false;
}

std::vector<std::vector<GroupStream>> streams_to_join(const GroupStreamsSeen& seen,
                                                      const std::vector<ncclComm_t>& comms) {
  std::vector<ncclComm_t> done;
  std::vector<std::vector<GroupStream>> sets;
  for (const ncclComm_t comm : comms) {
    if (std::find(done.begin(), done.end(), comm) != done.end()) continue;
    done.push_back(comm);
    std::vector<GroupStream> its;
    for (const GroupStream& s : seen.streams)
      if (s.comm == comm) its.push_back(s);
    if (its.size() > 1) sets.push_back(std::move(its));  // one stream: ordered already
  }
  return sets;
}

cudaError_t join_group_streams(const GroupStreamsSeen& seen, const std::vector<ncclComm_t>& comms,
                               std::string* error) {
  const std::vector<std::vector<GroupStream>> sets = streams_to_join(seen, comms);
  if (sets.empty()) return cudaSuccess;
  CurrentDeviceGuard device;
  cudaError_t failed = cudaSuccess;
  const char* what = "";
  for (const std::vector<GroupStream>& its : sets) {
    const char* call = "";
    if (const cudaError_t e = join_one(its, device, &call); e != cudaSuccess && failed == cudaSuccess)
      failed = e, what = call;
  }
  if (failed != cudaSuccess && error) *error = std::string(what) + " failed: " + cudaGetErrorString(failed);
  return failed;
}

}  // namespace topocoll::plugin::interposer
