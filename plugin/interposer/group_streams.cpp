#include "plugin/interposer/group_streams.h"

#include <cuda_runtime.h>

#include <algorithm>
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

}  // namespace

void add_group_stream(std::vector<GroupStream>& streams, const GroupStream& s) {
  if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
}

cudaError_t join_group_streams(const std::vector<GroupStream>& streams, std::string* error) {
  if (streams.size() < 2) return cudaSuccess;  // one stream: ordered already
  const std::vector<GroupStream>& distinct = streams;
  CurrentDeviceGuard device;
  std::vector<cudaEvent_t> events;
  cudaError_t failed = cudaSuccess;
  const char* what = "";
  auto check = [&](cudaError_t e, const char* call) {
    if (e != cudaSuccess && failed == cudaSuccess) failed = e, what = call;
    return e == cudaSuccess;
  };
  const GroupStream& hub = distinct.front();
  for (std::size_t i = 1; i < distinct.size(); ++i) {
    cudaEvent_t e = nullptr;
    const bool recorded = check(record(distinct[i], device, &e), "cudaEventRecord");
    if (e) events.push_back(e);
    if (recorded) check(wait(hub, device, e), "cudaStreamWaitEvent");
  }
  cudaEvent_t from_hub = nullptr;
  if (check(record(hub, device, &from_hub), "cudaEventRecord"))
    for (std::size_t i = 1; i < distinct.size(); ++i) check(wait(distinct[i], device, from_hub), "cudaStreamWaitEvent");
  if (from_hub) events.push_back(from_hub);
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  if (failed != cudaSuccess && error)
    *error = std::string(what) + " failed: " + cudaGetErrorString(failed);
  return failed;
}

}  // namespace topocoll::plugin::interposer
