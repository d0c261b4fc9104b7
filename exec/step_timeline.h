// Step times of one communicator's schedule collectives, from CUDA events
// (TOPOCOLL_STEP_TIMES, docs/usage.md).
//
// The NCCL backend records an event on the collective's stream at every step boundary
// (Backend::step_boundary: before step k and after the last step); step k's time is the
// elapsed time between boundaries k and k + 1: what the stream spent on the step's group of
// sends and receives and its kernels, waits for slower peers included. That is the quantity
// the cost model prices per step (sched/cost_model.h: alpha + the slowest flow + the
// reduce), so a profile shows which steps, or which fixed cost per step, a prediction misses.
//
// A collective's events are read only once its last one has completed (cudaEventQuery), at
// the start of the communicator's next timed collective or by drain(), so timing adds no
// host synchronisation to the hot path; with kMaxUnread collectives unread, further ones go
// untimed until those are read (memory stays bounded, nothing waits). Event queries run in
// relaxed capture mode, so a CUDA graph this or another thread captures is never
// invalidated. Timing never fails a collective: a CUDA error while recording drops that
// collective's times, with a warning.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace topocoll::exec {

// One timed collective, read.
struct StepTimes {
  std::string label;                 // what the caller named it (collective, bytes, algorithm)
  std::vector<double> step_us;       // per step
  std::vector<uint64_t> step_bytes;  // what this rank sent in each step (the caller's count)
};

class StepTimeline {
 public:
  // Where a read collective goes (the interposer logs it); and where a problem goes.
  using Sink = std::function<void(const StepTimes&)>;
  using Warn = std::function<void(const std::string&)>;
  static constexpr std::size_t kMaxUnread = 64;

  // One collective's events, filled by mark(); owned by the timeline.
  class Recording {
   public:
    // Records boundary `boundary`'s event on `stream` (the same stream for all of one
    // collective's boundaries, marked in order). Out of order or a CUDA failure: the
    // recording is dropped.
    void mark(int boundary, cudaStream_t stream) noexcept;

   private:
    friend class StepTimeline;
    StepTimes times;
    std::vector<cudaEvent_t> events;  // boundaries 0 .. steps
    std::size_t marked = 0;           // boundaries 0 .. marked - 1 are recorded
    bool ended = false;
    bool collective_failed = false;   // dropped quietly: the collective's own error is reported
    std::string failure;              // why it is dropped with a warning; "" while it is good
    bool dropped() const { return collective_failed || !failure.empty(); }
  };

  StepTimeline(Sink sink, Warn warn) : sink_(std::move(sink)), warn_(std::move(warn)) {}
  ~StepTimeline();  // destroys every event without reading it (drain() first to read them)
  StepTimeline(const StepTimeline&) = delete;
  StepTimeline& operator=(const StepTimeline&) = delete;

  // A collective of step_bytes.size() steps: reads what completed before it, then takes
  // steps + 1 events (created on the current device: call with the collective's device
  // current). Null when there is nothing to time (no steps), kMaxUnread collectives are
  // unread, or CUDA cannot make events.
  Recording* begin(std::string label, std::vector<uint64_t> step_bytes);
  // The collective was enqueued (completed = true) or failed part way (its times are
  // dropped). Every begin() gets one end().
  void end(Recording* recording, bool completed) noexcept;
  // Sends every read-ready collective to the sink, oldest first; stops at the first still
  // running. Never waits.
  void harvest() noexcept;
  // Waits for every ended collective's last event, then harvests them all (a destroy).
  void drain() noexcept;
  std::size_t unread() const;

 private:
  void read_front_locked();  // the oldest recording, complete: sink or drop it
  void recycle_locked(Recording& r);
  void warn_locked(const std::string& what);

  Sink sink_;
  Warn warn_;
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<Recording>> unread_;  // oldest first
  std::vector<cudaEvent_t> free_events_;
  // Read, and problems found, under the lock; the sink and warn get them outside it.
  std::vector<StepTimes> ready_;
  std::vector<std::string> warnings_;
  bool warned_ = false;  // one warning per communicator: the next failures are alike
};

}  // namespace topocoll::exec
