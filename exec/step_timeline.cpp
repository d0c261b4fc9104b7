#include "exec/step_timeline.h"

#include <cuda_runtime.h>

#include <utility>

namespace topocoll::exec {
namespace {

std::string cuda_failure(const char* call, cudaError_t e) {
  cudaGetLastError();  // not the application's error to find later
  return std::string(call) + " failed: " + cudaGetErrorString(e);
}

// Querying, waiting for and destroying events are "potentially unsafe" calls under CUDA
// graph capture: in the default (global) mode they would fail and invalidate a capture this
// thread or another thread has in progress (PyTorch captures while other threads run). None
// of these events is part of a capture, so the timeline makes them in relaxed mode.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace

void StepTimeline::Recording::mark(int boundary, cudaStream_t stream) noexcept {
  if (!failure.empty()) return;
  if (boundary < 0 || std::size_t(boundary) != marked || marked >= events.size()) {
    failure = "step boundary " + std::to_string(boundary) + " marked after " + std::to_string(marked) +
              " of a collective of " + std::to_string(times.step_bytes.size()) + " steps";
    return;
  }
  if (const cudaError_t e = cudaEventRecord(events[marked], stream); e != cudaSuccess) {
    failure = cuda_failure("cudaEventRecord", e);
    return;
  }
  ++marked;
}

StepTimeline::~StepTimeline() {
  RelaxedCaptureMode relaxed;
  for (auto& r : unread_)
    for (cudaEvent_t e : r->events) cudaEventDestroy(e);
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
}

StepTimeline::Recording* StepTimeline::begin(std::string label, std::vector<uint64_t> step_bytes) {
  if (step_bytes.empty()) return nullptr;
  harvest();
  RelaxedCaptureMode relaxed;
  std::lock_guard lock(mutex_);
  // Bounded without waiting: an application that runs far ahead keeps its pace, and its
  // later collectives are timed again once the oldest have been read.
  if (unread_.size() >= kMaxUnread) {
    warn_locked("more than " + std::to_string(kMaxUnread) +
                " collectives not yet complete: later ones go untimed until these are read");
    return nullptr;
  }
  auto r = std::make_unique<Recording>();
  r->times.label = std::move(label);
  r->times.step_bytes = std::move(step_bytes);
  const std::size_t boundaries = r->times.step_bytes.size() + 1;
  while (r->events.size() < boundaries) {
    cudaEvent_t e = nullptr;
    if (!free_events_.empty()) {
      e = free_events_.back();
      free_events_.pop_back();
    } else if (const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDefault); err != cudaSuccess) {
      warn_locked(cuda_failure("cudaEventCreateWithFlags", err) + "; this collective is not timed");
      recycle_locked(*r);
      return nullptr;
    }
    r->events.push_back(e);
  }
  unread_.push_back(std::move(r));
  return unread_.back().get();
}

void StepTimeline::end(Recording* recording, bool completed) noexcept {
  if (!recording) return;
  std::lock_guard lock(mutex_);
  recording->ended = true;
  if (recording->dropped()) return;
  if (!completed) recording->collective_failed = true;
  else if (recording->marked < recording->events.size())
    recording->failure = "step boundary " + std::to_string(recording->marked) + " was never marked";
}

void StepTimeline::read_front_locked() {
  std::unique_ptr<Recording> r = std::move(unread_.front());
  unread_.pop_front();
  if (!r->dropped()) {
    const std::size_t steps = r->times.step_bytes.size();
    r->times.step_us.resize(steps);
    for (std::size_t k = 0; k < steps && r->failure.empty(); ++k) {
      float ms = 0;
      if (const cudaError_t e = cudaEventElapsedTime(&ms, r->events[k], r->events[k + 1]); e != cudaSuccess)
        r->failure = cuda_failure("cudaEventElapsedTime", e);
      r->times.step_us[k] = double(ms) * 1e3;
    }
  }
  if (!r->failure.empty()) warn_locked("step times of " + r->times.label + " dropped: " + r->failure);
  else if (!r->collective_failed) ready_.push_back(std::move(r->times));
  recycle_locked(*r);
}

void StepTimeline::recycle_locked(Recording& r) {
  free_events_.insert(free_events_.end(), r.events.begin(), r.events.end());
  r.events.clear();
}

void StepTimeline::warn_locked(const std::string& what) {
  if (warned_) return;
  warned_ = true;
  warnings_.push_back(what + " (further step-timing problems of this communicator are not reported)");
}

void StepTimeline::harvest() noexcept {
  std::vector<StepTimes> ready;
  std::vector<std::string> warnings;
  {
    RelaxedCaptureMode relaxed;
    std::lock_guard lock(mutex_);
    while (!unread_.empty() && unread_.front()->ended) {
      Recording& oldest = *unread_.front();
      if (!oldest.dropped()) {
        const cudaError_t e = cudaEventQuery(oldest.events.back());
        if (e == cudaErrorNotReady) break;  // not an error: CUDA keeps no error for it
        if (e != cudaSuccess) oldest.failure = cuda_failure("cudaEventQuery", e);
      }
      read_front_locked();
    }
    ready.swap(ready_);
    warnings.swap(warnings_);
  }
  for (const std::string& w : warnings)
    if (warn_) warn_(w);
  for (const StepTimes& t : ready)
    if (sink_) sink_(t);
}

void StepTimeline::drain() noexcept {
  {
    RelaxedCaptureMode relaxed;
    std::lock_guard lock(mutex_);
    for (auto& r : unread_)
      if (r->ended && !r->dropped())
        if (const cudaError_t e = cudaEventSynchronize(r->events.back()); e != cudaSuccess)
          r->failure = cuda_failure("cudaEventSynchronize", e);
  }
  harvest();
}

std::size_t StepTimeline::unread() const {
  std::lock_guard lock(mutex_);
  return unread_.size();
}

}  // namespace topocoll::exec
