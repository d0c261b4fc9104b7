#include "plugin/interposer/device_scratch.h"

#include <algorithm>

#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_guard.h"

namespace topocoll::plugin::interposer {

DeviceScratch::~DeviceScratch() {
  CurrentDeviceGuard device_guard;
  device_guard.use(device_);
  // Relaxed: another thread may be capturing a graph in global mode (PyTorch destroys
  // process groups while other threads run); an unsafe call would invalidate that capture.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  // Stream-ordered frees after the last uses: nothing here waits for the device.
  if (eager_.buffer) release_after_uses(eager_.buffer);
  if (captured_.buffer) release_after_uses(captured_.buffer);
  for (void* p : retired_) release_after_uses(p);
  for (const Use& u : last_uses_) quietly(cudaEventDestroy(u.event));
  for (cudaEvent_t e : spare_events_) quietly(cudaEventDestroy(e));
  // Returns at once; the stream's pending frees still run (cudaStreamDestroy).
  if (alloc_stream_) quietly(cudaStreamDestroy(alloc_stream_));
  cudaThreadExchangeStreamCaptureMode(&mode);
}

void DeviceScratch::release_after_uses(void* buffer) {
  if (!buffer || !alloc_stream_) return;
  for (const Use& u : last_uses_) quietly(cudaStreamWaitEvent(alloc_stream_, u.event, 0));
  quietly(cudaFreeAsync(buffer, alloc_stream_));
}

void* DeviceScratch::reserve(std::size_t bytes, bool captured) {
  Region& region = captured ? captured_ : eager_;
  if (bytes <= region.capacity) return region.buffer;
  const std::size_t grown = grown_capacity(region.capacity, bytes);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  void* fresh = nullptr;
  cudaError_t err = cudaSuccess;
  if (!alloc_stream_) err = quietly(cudaStreamCreateWithFlags(&alloc_stream_, cudaStreamNonBlocking));
  if (err == cudaSuccess) err = quietly(cudaMallocAsync(&fresh, grown, alloc_stream_));
  // Once allocated, usable from any stream: the allocation itself is the only work to wait
  // for, and it is on our own stream (no user work is waited for).
  if (err == cudaSuccess) err = quietly(cudaStreamSynchronize(alloc_stream_));
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (err != cudaSuccess) {
    if (fresh) quietly(cudaFreeAsync(fresh, alloc_stream_));
    return nullptr;
  }
  if (region.buffer) {
    // Eager uses are all recorded (mark_used): freed after them. A captured graph may be
    // replayed later on the old captured buffer: kept until the communicator goes.
    if (captured) retired_.push_back(region.buffer);
    else release_after_uses(region.buffer);
  }
  region.buffer = fresh;
  region.capacity = grown;
  return region.buffer;
}

void DeviceScratch::order_after_previous(cudaStream_t stream) {
  if (last_uses_.empty() || stream_capturing(stream)) return;
  // Waited for on every stream, the one of the last use too: the same handle may name
  // another stream by now (cudaStreamPerThread in another thread; a stream destroyed with
  // its work still queued and a new one given its address), and a wait on an event already
  // behind the stream costs nothing.
  for (const Use& u : last_uses_)
    if (quietly(cudaStreamWaitEvent(stream, u.event, 0)) != cudaSuccess)
      quietly(cudaEventSynchronize(u.event));  // no order on the device: wait it out rather than race
}

void DeviceScratch::mark_used(const std::vector<cudaStream_t>& streams) {
  std::vector<cudaStream_t> eager;
  for (cudaStream_t s : streams)
    if (!stream_capturing(s) && std::find(eager.begin(), eager.end(), s) == eager.end()) eager.push_back(s);
  // A batch wholly inside a capture has not run yet: the earlier eager uses stay the ones to
  // wait for. Otherwise every eager call of this batch waited for them (order_after_previous),
  // so this batch's events imply them and replace them.
  if (eager.empty()) return;
  for (const Use& u : last_uses_) spare_events_.push_back(u.event);
  last_uses_.clear();
  for (cudaStream_t s : eager) {
    cudaEvent_t e = nullptr;
    if (!spare_events_.empty()) {
      e = spare_events_.back();
      spare_events_.pop_back();
    } else if (quietly(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)) != cudaSuccess) {
      quietly(cudaStreamSynchronize(s));  // untracked use: wait it out rather than race (not captured)
      continue;
    }
    if (quietly(cudaEventRecord(e, s)) != cudaSuccess) {
      spare_events_.push_back(e);
      quietly(cudaStreamSynchronize(s));
      continue;
    }
    last_uses_.push_back({s, e});
  }
}

}  // namespace topocoll::plugin::interposer
