#include "plugin/interposer/device_scratch.h"

#include <algorithm>

#include "plugin/interposer/device_guard.h"

namespace topocoll::plugin::interposer {
namespace {

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) return false;
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

DeviceScratch::~DeviceScratch() {
  CurrentDeviceGuard device_guard;
  device_guard.use(device_);
  // Relaxed: another thread may be capturing a graph in global mode (PyTorch destroys
  // process groups while other threads run); cudaFree would then fail and invalidate that
  // capture. NCCL's own destroy does the same.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  // cudaFree waits for work still using the memory (implicit device synchronisation).
  if (eager_.buffer) cudaFree(eager_.buffer);
  if (captured_.buffer) cudaFree(captured_.buffer);
  for (void* p : retired_) cudaFree(p);
  for (const Use& u : last_uses_) cudaEventDestroy(u.event);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  cudaThreadExchangeStreamCaptureMode(&mode);
}

void* DeviceScratch::reserve(std::size_t bytes, bool captured) {
  Region& region = captured ? captured_ : eager_;
  if (bytes <= region.capacity) return region.buffer;
  std::size_t grown = region.capacity ? region.capacity : std::size_t(1) << 20;
  while (grown < bytes) grown *= 2;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  void* fresh = nullptr;
  const cudaError_t err = cudaMalloc(&fresh, grown);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so the user's next call is unaffected
    return nullptr;
  }
  // The old buffer may still be used by enqueued work or a captured graph: kept until
  // the communicator goes.
  if (region.buffer) retired_.push_back(region.buffer);
  region.buffer = fresh;
  region.capacity = grown;
  return region.buffer;
}

void DeviceScratch::order_after_previous(cudaStream_t stream) {
  if (last_uses_.empty() || capturing(stream)) return;
  for (const Use& u : last_uses_)
    if (u.stream != stream) cudaStreamWaitEvent(stream, u.event, 0);
}

void DeviceScratch::mark_used(const std::vector<cudaStream_t>& streams) {
  std::vector<cudaStream_t> eager;
  for (cudaStream_t s : streams)
    if (!capturing(s) && std::find(eager.begin(), eager.end(), s) == eager.end()) eager.push_back(s);
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
    } else if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
      cudaGetLastError();
      cudaStreamSynchronize(s);  // untracked use: wait it out rather than race (not captured)
      continue;
    }
    if (cudaEventRecord(e, s) != cudaSuccess) {
      cudaGetLastError();
      spare_events_.push_back(e);
      cudaStreamSynchronize(s);
      continue;
    }
    last_uses_.push_back({s, e});
  }
}

}  // namespace topocoll::plugin::interposer
