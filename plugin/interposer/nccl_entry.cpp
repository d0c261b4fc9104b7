// The exported NCCL entry points of libnccl-topocoll.so (LD_PRELOAD). Each is one decision:
// topocoll takes the call (interposer.h) or it goes to NCCL's strong pnccl* symbol
// unchanged. Nothing else of NCCL is defined here, so every other call binds to libnccl.
// No exception crosses these functions.
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>

#if TOPOCOLL_INTERPOSER_CUDA
#include "exec/nccl_backend.h"
#endif
#include "plugin/interposer/buffer_registration.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/interposer.h"
#include "plugin/log.h"

#define TOPOCOLL_EXPORT extern "C" __attribute__((visibility("default")))

namespace ti = topocoll::plugin::interposer;
using topocoll::sched::Collective;

namespace {

// NCCL keeps one last error for the process (debug.cc ncclLastError, written by each of its
// WARNs), which ncclGetLastError returns. A call of topocoll's that failed leaves its last
// warning here, with the text NCCL's held at that moment: while NCCL's is still that (it
// logged nothing since), ncclGetLastError answers with topocoll's.
struct LastFailure {
  std::mutex mutex;
  char ours[1024] = "";
  char nccl_then[1024] = "";
};
LastFailure& last_failure() {
  static LastFailure f;
  return f;
}

// Every entry point starts here: the warnings topocoll logs on this thread from now on are
// the call's own ...
void begin_call() noexcept { topocoll::plugin::clear_last_warning_on_this_thread(); }
// ... and ends here: a call that failed after logging one leaves it for ncclGetLastError (a
// call that did not fail leaves the last failure's, as NCCL keeps its last error).
ncclResult_t finish_call(ncclResult_t r) noexcept {
  const char* warning = topocoll::plugin::last_warning_on_this_thread();
  if (r != ncclSuccess && r != ncclInProgress && *warning) {
    LastFailure& f = last_failure();
    const char* nccl = pncclGetLastError(nullptr);
    std::lock_guard lock(f.mutex);
    std::snprintf(f.ours, sizeof f.ours, "%s", warning);
    std::snprintf(f.nccl_then, sizeof f.nccl_then, "%s", nccl ? nccl : "");
  }
  topocoll::plugin::clear_last_warning_on_this_thread();
  return r;
}

template <class Fn>
ncclResult_t guarded(const char* what, Fn&& fn) noexcept {
  try {
    return fn();
#if TOPOCOLL_INTERPOSER_CUDA
  } catch (const topocoll::exec::NcclCallError& e) {
    // NCCL's (or CUDA's) own error class reaches the caller.
    TC_WARN("%s failed: %s", what, e.what());
    return e.result();
#endif
  } catch (const std::exception& e) {
    TC_WARN("%s failed: %s", what, e.what());
  } catch (...) {
    TC_WARN("%s failed: unknown exception", what);
  }
  return ncclInternalError;
}

// A served collective's call: guarded, and a failure topocoll threw, which never reached
// NCCL, fails the user's group as NCCL would fail it (fail_users_group).
template <class Fn>
ncclResult_t guarded_collective(const char* what, Fn&& fn) noexcept {
  bool returned = false;
  const ncclResult_t r = guarded(what, [&] {
    const ncclResult_t result = fn();
    returned = true;
    return result;
  });
  return returned ? r : ti::fail_users_group(r, what);
}

// After a successful create: topocoll's per-communicator init. Returns NCCL's result `r`, or
// ncclSystemError when topocoll's init ran out of host memory: its peers may be waiting in
// topocoll's init collectives for this rank, which cannot know how far it got, so the user's
// init fails here (abort the communicator) rather than leave this rank's next call to meet
// their collectives. Any other failure of topocoll's init only leaves the communicator to
// NCCL (decided alike on every rank, or shared by the exchange).
ncclResult_t after_create(ncclResult_t r, ncclComm_t comm, const ncclConfig_t* config, ncclComm_t parent) {
  try {
    if (r == ncclInProgress && comm) {
      // A non-blocking init still running: known as non-blocking from now on.
      guarded("topocoll communicator init", [&] {
        ti::comm_created_in_progress(comm);
        return ncclSuccess;
      });
      return r;
    }
    if (r != ncclSuccess) return r;
    ti::comm_created(comm, config, parent);
  } catch (const std::bad_alloc&) {
    TC_WARN("communicator %p: out of host memory during topocoll's init; the init fails with "
            "ncclSystemError (its peers may wait for this rank): abort the communicator",
            static_cast<void*>(comm));
    return ncclSystemError;
  } catch (const std::exception& e) {
    TC_WARN("topocoll communicator init failed: %s", e.what());
  } catch (...) {
    TC_WARN("topocoll communicator init failed: unknown exception");
  }
  return r;
}

// A split or shrink: inside a user group NCCL writes *newcomm only at the group's end, where
// group_end takes it up (interposer.h child_created_in_group).
ncclResult_t after_child_create(ncclResult_t r, ncclComm_t* newcomm, const ncclConfig_t* config,
                                ncclComm_t parent) {
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm && !*newcomm) {
    bool deferred = false;
    try {
      deferred = ti::child_created_in_group(newcomm, config, parent);
    } catch (const std::bad_alloc&) {
      // Not taken up at the group's end: its peers would exchange on it without this rank.
      TC_WARN("out of host memory noting a split made inside a group; the split fails with ncclSystemError");
      return ncclSystemError;
    } catch (const std::exception& e) {
      TC_WARN("topocoll communicator init failed: %s", e.what());
    }
    if (deferred) return r;
  }
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm && ti::interposer_enabled() &&
      ti::created_by_nonblocking_parent(parent)) {
    // NCCL's own thread writes the handle when the child is made, maybe while we look.
    if (const ncclComm_t made = __atomic_load_n(newcomm, __ATOMIC_ACQUIRE))
      guarded("topocoll communicator init", [&] {
        ti::comm_created_in_progress(made);
        return ncclSuccess;
      });
    return r;
  }
  return after_create(r, newcomm ? *newcomm : nullptr, config, parent);
}

}  // namespace

// --- collectives ---------------------------------------------------------------------------

TOPOCOLL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclRedOp_t op,
                                           ncclComm_t comm, cudaStream_t stream) {
  begin_call();
  if (!ti::served_state(comm))
    return finish_call(pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream));
  return finish_call(guarded_collective("ncclAllReduce", [&] {
    return ti::serve_collective({Collective::AllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream});
  }));
}

TOPOCOLL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                               size_t recvcount, ncclDataType_t datatype,
                                               ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream) {
  begin_call();
  if (!ti::served_state(comm))
    return finish_call(pncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream));
  return finish_call(guarded_collective("ncclReduceScatter", [&] {
    return ti::serve_collective({Collective::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream});
  }));
}

TOPOCOLL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream) {
  begin_call();
  if (!ti::served_state(comm))
    return finish_call(pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream));
  return finish_call(guarded_collective("ncclAllGather", [&] {
    return ti::serve_collective({Collective::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, comm, stream});
  }));
}

TOPOCOLL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream) {
  begin_call();
  if (!ti::served_state(comm))
    return finish_call(pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream));
  return finish_call(guarded_collective("ncclAlltoAll", [&] {
    return ti::serve_collective({Collective::AllToAll, sendbuff, recvbuff, count, datatype, ncclSum, comm, stream});
  }));
}

// --- groups --------------------------------------------------------------------------------

TOPOCOLL_EXPORT ncclResult_t ncclGroupStart() {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclGroupStart());
  return finish_call(guarded("ncclGroupStart", [] { return ti::group_start(); }));
}

TOPOCOLL_EXPORT ncclResult_t ncclGroupEnd() {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclGroupEnd());
  return finish_call(guarded("ncclGroupEnd", [] { return ti::group_end(); }));
}

TOPOCOLL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclGroupSimulateEnd(simInfo));
  return finish_call(guarded("ncclGroupSimulateEnd", [&] { return ti::group_simulate_end(simInfo); }));
}

// --- communicator lifecycle ----------------------------------------------------------------

TOPOCOLL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                              int rank) {
  begin_call();
  const ncclResult_t r = pncclCommInitRank(comm, nranks, commId, rank);
  return finish_call(after_create(r, comm ? *comm : nullptr, nullptr, nullptr));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                    ncclUniqueId commId, int rank,
                                                    ncclConfig_t* config) {
  begin_call();
  const ncclResult_t r = pncclCommInitRankConfig(comm, nranks, commId, rank, config);
  return finish_call(after_create(r, comm ? *comm : nullptr, config, nullptr));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank,
                                                      int nId, ncclUniqueId* commIds,
                                                      ncclConfig_t* config) {
  begin_call();
  const ncclResult_t r = pncclCommInitRankScalable(newcomm, nranks, myrank, nId, commIds, config);
  return finish_call(after_create(r, newcomm ? *newcomm : nullptr, config, nullptr));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  begin_call();
  const ncclResult_t r = pncclCommInitAll(comms, ndev, devlist);
  if (r == ncclSuccess && comms) {
    guarded("topocoll communicator init", [&] {
      ti::comms_created_locally(comms, ndev, devlist);
      return ncclSuccess;
    });
  }
  return finish_call(r);
}

TOPOCOLL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                           ncclComm_t* newcomm, ncclConfig_t* config) {
  begin_call();
  const ncclResult_t r = pncclCommSplit(comm, color, key, newcomm, config);
  return finish_call(after_child_create(r, newcomm, config, comm));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList,
                                            int excludeRanksCount, ncclComm_t* newcomm,
                                            ncclConfig_t* config, int shrinkFlags) {
  begin_call();
  if ((shrinkFlags & NCCL_SHRINK_ABORT) && ti::interposer_enabled())
    guarded("ncclCommShrink", [&] {
      ti::revoke_ring_comm(comm);
      ti::leave_to_nccl_for_shrink_abort(comm);
      return ncclSuccess;
    });
  const ncclResult_t r =
      pncclCommShrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
  return finish_call(after_child_create(r, newcomm, config, comm));
}

// --- what the topology-ordered split must follow (buffer_registration.h) -------------------

TOPOCOLL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size,
                                              void** handle) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommRegister(comm, buff, size, handle));
  return finish_call(guarded("ncclCommRegister", [&] { return ti::comm_register(comm, buff, size, handle); }));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommDeregister(comm, handle));
  return finish_call(guarded("ncclCommDeregister", [&] { return ti::comm_deregister(comm, handle); }));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  // A query, also made by NCCL inside the calls it runs for topocoll: the call's warnings stay.
  if (!ti::interposer_enabled()) return pncclCommGetAsyncError(comm, asyncError);
  return guarded("ncclCommGetAsyncError", [&] { return ti::comm_async_error(comm, asyncError); });
}

TOPOCOLL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommRevoke(comm, revokeFlags));
  return finish_call(guarded("ncclCommRevoke", [&] { return ti::comm_revoke(comm, revokeFlags); }));
}

TOPOCOLL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommFinalize(comm));
  guarded("topocoll finalize", [&] { return ti::comm_finalize(comm); });
  const ncclResult_t r = pncclCommFinalize(comm);
  if (r == ncclSuccess || r == ncclInProgress) ti::note_finalize_called(comm);
  return finish_call(r);
}

TOPOCOLL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommDestroy(comm));
  return finish_call(ti::comm_release(comm, false, pncclCommDestroy));  // never throws
}

TOPOCOLL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  begin_call();
  if (!ti::interposer_enabled()) return finish_call(pncclCommAbort(comm));
  return finish_call(ti::comm_release(comm, true, pncclCommAbort));  // never throws
}

// --- errors --------------------------------------------------------------------------------

// NCCL's last error, or topocoll's last failure's warning when NCCL logged nothing since
// (last_failure above): a framework quoting it with a failed call (PyTorch does) then shows
// why topocoll failed it, from any thread, as NCCL's own answers from any thread.
TOPOCOLL_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  const char* nccl = pncclGetLastError(comm);
  if (!ti::interposer_enabled()) return nccl;
  LastFailure& f = last_failure();
  std::lock_guard lock(f.mutex);
  return *f.ours && std::strcmp(nccl ? nccl : "", f.nccl_then) == 0 ? f.ours : nccl;
}
