#include "plugin/interposer/release_fence.h"

#include <algorithm>
#include <thread>

#include "plugin/interposer/buffer_registration.h"
#include "plugin/interposer/device_guard.h"
#include "plugin/log.h"
#include "sched/schedule.h"

namespace topocoll::plugin::interposer {

namespace {
thread_local ServedCallsInside* innermost = nullptr;
}  // namespace

ServedCallsInside::ServedCallsInside(const std::vector<PendingCollective>& calls) : outer_(innermost) {
  for (const PendingCollective& c : calls) {
    if (!c.state || std::find(entered_.begin(), entered_.end(), c.state) != entered_.end()) continue;
    // Kept first, counted after: a push that throws (out of host memory) leaves no count
    // the destructor, which then never runs, would not take back.
    entered_.push_back(c.state);
    c.state->calls_inside.fetch_add(1);
  }
  innermost = this;
}

ServedCallsInside::~ServedCallsInside() {
  for (const auto& st : entered_) st->calls_inside.fetch_sub(1);
  innermost = outer_;
}

ServedCallsInside* ServedCallsInside::of_this_thread() { return innermost; }

void ServedCallsInside::leave_stopped() {
  // The states stay alive (the batch's calls hold them); only the count lets the release go.
  std::erase_if(entered_, [](const std::shared_ptr<CommState>& st) {
    if (!st->calls_stopped.load()) return false;
    st->calls_inside.fetch_sub(1);
    return true;
  });
}

void leave_stopped_communicators() {
  if (ServedCallsInside* scope = ServedCallsInside::of_this_thread()) scope->leave_stopped();
}

const char* stopped_by(const CommState& st) {
  if (st.aborting.load()) return "aborted by another thread";
  if (st.revoked.load()) return "revoked (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT)";
  return "destroyed by another thread";
}

namespace {
// Waits until no served call is inside `st` or `deadline` passes; whether none is.
bool calls_left_by(const CommState& st, std::chrono::steady_clock::time_point deadline) {
  while (st.calls_inside.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}
}  // namespace

bool fence_served_calls(CommState& st, bool abort, std::chrono::milliseconds bound,
                        std::chrono::milliseconds stopped_leave) {
  if (abort) {
    st.aborting.store(true);
    st.calls_stopped.store(true);
  }
  st.releasing.store(true);
  if (calls_left_by(st, std::chrono::steady_clock::now() + bound)) return true;
  // A destroy lets the calls inside finish, as the peers are expected to be alive; past the
  // bound they are stopped as an abort would (a vote behind peers that never vote must not
  // poll a communicator freed next, nor issue on it once its vote ends).
  st.calls_stopped.store(true);
  if (calls_left_by(st, std::chrono::steady_clock::now() + stopped_leave)) {
    TC_WARN("comm %p: served topocoll call(s) on other threads were still inside after %lld ms; "
            "stopped, they left: they issue nothing more",
            static_cast<void*>(st.comm), static_cast<long long>(bound.count()));
    return true;
  }
  TC_WARN("comm %p: %d served topocoll call(s) on other threads still inside after %lld ms; "
          "releasing it anyway (NCCL's abort ends what they wait for in NCCL, but a call "
          "on a communicator being released is undefined in NCCL)",
          static_cast<void*>(st.comm), st.calls_inside.load(),
          static_cast<long long>((bound + stopped_leave).count()));
  return false;
}

void stop_calls_for_revoke(CommState& st) {
  st.revoked.store(true);
  st.calls_stopped.store(true);
}

ncclResult_t drop_released_calls(std::vector<PendingCollective>& calls, DropCalls which, const char* when) {
  auto dropped = [which](const CommState& st) {
    if (which == DropCalls::OfReleasingOrStopped) return releasing(st) || st.calls_stopped.load();
    // Seen from inside the fence, a release has taken the split only once it gave up waiting.
    return st.calls_stopped.load() || st.ring_comm_taken.load();
  };
  const auto gone = std::stable_partition(calls.begin(), calls.end(),
                                          [&](const PendingCollective& p) { return !dropped(*p.state); });
  if (gone == calls.end()) return ncclSuccess;
  for (auto it = gone; it != calls.end(); ++it)
    TC_WARN("comm %p: %s %s; its %s of %zu elements was not run", static_cast<void*>(it->state->comm),
            stopped_by(*it->state), when,
            std::string(sched::to_string(it->call.collective)).c_str(), it->call.count);
  calls.erase(gone, calls.end());
  return ncclInvalidUsage;
}

ncclResult_t drop_out_of_step_calls(std::vector<PendingCollective>& calls) {
  const auto gone = std::stable_partition(calls.begin(), calls.end(), [](const PendingCollective& p) {
    return p.state->out_of_step.load() == ncclSuccess;
  });
  if (gone == calls.end()) return ncclSuccess;
  for (auto it = gone; it != calls.end(); ++it)
    TC_WARN("comm %p: out of step with its peers; its %s of %zu elements was not run",
            static_cast<void*>(it->state->comm), std::string(sched::to_string(it->call.collective)).c_str(),
            it->call.count);
  calls.erase(gone, calls.end());
  return ncclSystemError;
}

// Both sides write their flag before looking at the other's (sequentially consistent
// atomics): either the release's exchange finds the split, or the split sees the release
// and takes itself back; whichever exchange gets it releases it, exactly once.
void adopt_ring_comm(CommState& st, ncclComm_t made) {
  publish_ring_comm(st, made);
  if (!st.ring_comm_taken.load()) return;
  if (ncclComm_t mine = st.ring_comm.exchange(nullptr)) {
    TC_WARN("comm %p: its topology-ordered communicator %p was made after the release gave up "
            "waiting for the call making it; %s it now",
            static_cast<void*>(st.comm), static_cast<void*>(mine),
            st.aborting.load() ? "aborting" : "destroying");
    release_ring_comm(st, mine, st.aborting.load());
  }
}

ncclComm_t release_ring_comm(const CommState& st, ncclComm_t ring, bool abort, bool shares_user_abort_flag) {
  CurrentDeviceGuard device_guard;
  device_guard.use(st.device);
  ncclResult_t failed = ncclSuccess;
  if (!abort && st.revoked.load() && shares_user_abort_flag) {
    if (pncclCommGetAsyncError(ring, &failed) != ncclSuccess) failed = ncclSystemError;
    if (failed != ncclSuccess) return ring;
    if (const ncclResult_t r = pncclCommDestroy(ring); r != ncclSuccess)
      TC_WARN("comm %p: destroying its revoked topology-ordered communicator %p failed: %s",
              static_cast<void*>(st.comm), static_cast<void*>(ring), pncclGetErrorString(r));
    return nullptr;
  }
  if (!abort && !st.revoked.load() && pncclCommGetAsyncError(ring, &failed) != ncclSuccess) failed = ncclSystemError;
  if (!abort && (st.revoked.load() || (failed != ncclSuccess && failed != ncclInProgress))) {
    TC_INFO(NCCL_INIT, "comm %p: its topology-ordered communicator %p %s: aborting it, not destroying it",
            static_cast<void*>(st.comm), static_cast<void*>(ring),
            st.revoked.load() ? "was revoked" : "failed");
    abort = true;
  }
  const ncclResult_t r = abort ? pncclCommAbort(ring) : pncclCommDestroy(ring);
  if (r != ncclSuccess)
    TC_WARN("comm %p: %s its topology-ordered communicator %p failed: %s", static_cast<void*>(st.comm),
            abort ? "aborting" : "destroying", static_cast<void*>(ring), pncclGetErrorString(r));
  return nullptr;
}

void mark_out_of_step(CommState& st, const char* what) noexcept {
  ncclResult_t none = ncclSuccess;
  if (!st.out_of_step.compare_exchange_strong(none, ncclSystemError)) return;
  TC_WARN("comm %p rank %d: %s failed after its steps may have begun: the communicator is out of step with "
          "its peers and ncclCommGetAsyncError reports ncclSystemError for it: abort it",
          static_cast<void*>(st.comm), st.rank, what);
}

ncclComm_t take_ring_comm_for_release(CommState& st) {
  st.ring_comm_taken.store(true);
  return st.ring_comm.exchange(nullptr);
}

}  // namespace topocoll::plugin::interposer
