#include "plugin/interposer/buffer_registration.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/log.h"

namespace topocoll::plugin::interposer {

ncclResult_t comm_register(ncclComm_t comm, void* buff, std::size_t size, void** handle) {
  const ncclResult_t r = pncclCommRegister(comm, buff, size, handle);
  if (r != ncclSuccess || !handle) return r;
  std::shared_ptr<CommState> st = CommRegistry::instance().share(comm);
  if (!st || !st->served) return r;
  CommState::Registration reg{buff, size, *handle, nullptr};
  std::lock_guard lock(st->registrations_mutex);
  if (ncclComm_t ring = st->ring_comm.load()) {
    if (pncclCommRegister(ring, buff, size, &reg.ring_handle) != ncclSuccess) {
      reg.ring_handle = nullptr;
      TC_WARN("comm %p: registering %zu bytes on the topology-ordered communicator failed; "
              "NCCL there copies instead", static_cast<void*>(comm), size);
    }
  }
  st->registrations.push_back(reg);
  return r;
}

ncclResult_t comm_deregister(ncclComm_t comm, void* handle) {
  if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) {
    std::lock_guard lock(st->registrations_mutex);
    auto it = std::find_if(st->registrations.begin(), st->registrations.end(),
                           [&](const CommState::Registration& r) { return r.handle == handle; });
    if (it != st->registrations.end()) {
      if (ncclComm_t ring = st->ring_comm.load(); ring && it->ring_handle)
        pncclCommDeregister(ring, it->ring_handle);
      st->registrations.erase(it);
    }
  }
  return pncclCommDeregister(comm, handle);
}

ncclResult_t comm_async_error(ncclComm_t comm, ncclResult_t* async_error) {
  const ncclResult_t r = pncclCommGetAsyncError(comm, async_error);
  if (r != ncclSuccess || !async_error || *async_error != ncclSuccess) return r;
  if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) {
    if (const ncclResult_t e = st->out_of_step.load(); e != ncclSuccess) {
      *async_error = e;
      return r;
    }
    // A revoked split's failures are the revoke's doing (its kernels were ended), not news
    // of the user's communicator: NCCL reports none for a revoked communicator either.
    if (ncclComm_t ring = st->ring_comm.load(); ring && !st->revoked.load()) {
      ncclResult_t ring_error = ncclSuccess;
      if (pncclCommGetAsyncError(ring, &ring_error) == ncclSuccess && ring_error != ncclSuccess &&
          ring_error != ncclInProgress)
        *async_error = ring_error;
    }
  }
  return r;
}

ncclResult_t comm_revoke(ncclComm_t comm, int flags) {
  // Flags NCCL refuses revoke nothing: nothing is stopped either.
  if (flags != NCCL_REVOKE_DEFAULT) return pncclCommRevoke(comm, flags);
  if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) {
    // What NCCL refuses (revoked already, finalized, being destroyed: init.cc ncclCommRevoke)
    // changes nothing here either: NCCL's answer goes back and the calls keep running.
    if (st->revoked.load() || st->finalize_called.load() || st->releasing.load()) return pncclCommRevoke(comm, flags);
    // Before NCCL ends the kernels: a vote waiting on another thread must not take the end
    // of its allreduce for its peers' answer (release_fence.h).
    stop_calls_for_revoke(*st);
    if (ncclComm_t ring = st->ring_comm.load()) pncclCommRevoke(ring, flags);
  }
  return pncclCommRevoke(comm, flags);
}

void revoke_ring_comm(ncclComm_t comm) {
  if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) {
    stop_calls_for_revoke(*st);
    if (ncclComm_t ring = st->ring_comm.load()) pncclCommRevoke(ring, NCCL_REVOKE_DEFAULT);
  }
}

void leave_to_nccl_for_shrink_abort(ncclComm_t comm) {
  if (std::shared_ptr<CommState> st = CommRegistry::instance().share(comm)) {
    // Out of step with its peers' topocoll calls, which no longer run: NCCL's calls on it,
    // after an abort that ends every rank's kernels, are NCCL's to judge.
    st->out_of_step = ncclSuccess;
    if (!st->served) return;
    CommRegistry::instance().set_unserved(*st);
    TC_INFO(NCCL_INIT, "comm %p: shrinking with NCCL_SHRINK_ABORT; its calls go to NCCL from now on",
            static_cast<void*>(comm));
  }
}

void publish_ring_comm(CommState& st, ncclComm_t made) {
  // Under the lock that comm_register takes: a buffer registered meanwhile is either in the
  // list mirrored here or sees the published split and registers itself there.
  std::lock_guard lock(st.registrations_mutex);
  for (CommState::Registration& reg : st.registrations)
    if (!reg.ring_handle && pncclCommRegister(made, reg.buff, reg.size, &reg.ring_handle) != ncclSuccess)
      reg.ring_handle = nullptr;
  st.ring_comm.store(made);
}

}  // namespace topocoll::plugin::interposer
