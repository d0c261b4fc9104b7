// The interposer's logic behind the exported NCCL entry points (nccl_entry.cpp): what
// happens when a communicator is created or destroyed, when a collective is called on a
// served communicator, and at ncclGroupStart/End. The entry points stay one line each and
// catch every exception; nothing here is exported.
//
// Group semantics (docs/usage.md, "Interposer"): ncclGroupStart/End are always forwarded to
// NCCL, so p2p calls, unserved collectives and communicator creation inside a group keep
// NCCL's meaning. Served collectives inside a group are queued (collective_queue.h); at the
// outermost ncclGroupEnd NCCL's group is closed first, then communicators created in the
// group finish their topocoll init (one grouped identity exchange), then the queued
// collectives run step by step. Ordering: within one group NCCL gives no order between its
// operations, so running the queued collectives after the group's NCCL work on each stream
// is one valid order, and every rank uses the same one.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

#include "sched/schedule.h"

namespace topocoll::plugin::interposer {

struct CollectiveCall {
  sched::Collective collective = sched::Collective::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  std::size_t count = 0;  // NCCL's count argument for this collective
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;  // ignored for allgather / all-to-all
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// NCCL's own collective for the call on `comm` (the user's, or the topology-ring split).
ncclResult_t forward_collective(const CollectiveCall& call, ncclComm_t comm);

// A collective on a served communicator: decides (route cache), then forwards, queues (inside
// a group) or runs the schedule on the user's stream.
ncclResult_t serve_collective(const CollectiveCall& call);

// A served call that topocoll itself failed (`r`) inside the user's group fails the whole
// group, as NCCL fails a group one of whose calls failed (group.h ncclGroupErrCheck): NCCL's
// part launches nothing and the outermost ncclGroupEnd returns `r`. Returns `r`; outside a
// group it only returns it.
ncclResult_t fail_users_group(ncclResult_t r, const char* call_name);

ncclResult_t group_start();
// The outermost end: NCCL's group, the inits made in it, then the queued calls, each
// communicator's streams in the group joined around its calls (group_streams.h).
ncclResult_t group_end();
// ncclGroupSimulateEnd closes NCCL's group and launches nothing: the thread's depth must
// follow it (otherwise every later served call on the thread would be queued forever), and
// the calls queued in the group are dropped as NCCL drops its own.
ncclResult_t group_simulate_end(ncclSimInfo_t* info);

// After NCCL created `comm` (InitRank*, Split, Shrink). `config` may be null; `parent` is
// the communicator it was split from (null for InitRank*).
// Outside a group it runs the init exchange at once, unless `finish_now` is false (the
// group's end, which exchanges all it made in one batch). A non-blocking one is registered
// unserved, never asked anything.
void comm_created(ncclComm_t comm, const ncclConfig_t* config, ncclComm_t parent, bool finish_now = true);
// A split or shrink inside the caller's user group: NCCL writes the child's handle only at
// the outermost ncclGroupEnd (NCCL 2.28 init.cc: "*newcomm should be NCCL_COMM_NULL until
// comm split fully complete"), so the call is remembered with a copy of its config and
// group_end passes the child to comm_created once NCCL has written it. Returns false
// outside a group (the caller then calls comm_created itself).
bool child_created_in_group(ncclComm_t* handle, const ncclConfig_t* config, ncclComm_t parent);
// After a non-blocking create returned ncclInProgress: registers `comm` as non-blocking
// and unserved, so its children fall back too.
void comm_created_in_progress(ncclComm_t comm);
// Whether a split or shrink of `parent` is made in NCCL's own thread (a non-blocking parent,
// or NCCL_COMM_BLOCKING=0: the group's blocking mode is the parent's, init.cc
// ncclCommInitChildComm): its child's handle is written whenever that thread is done. A
// parent topocoll does not know counts as one (a child of a non-blocking communicator
// written after its split returned).
bool created_by_nonblocking_parent(ncclComm_t parent);
// ncclCommInitAll: every rank lives in this process, so no exchange is needed.
void comms_created_locally(const ncclComm_t* comms, int ndev, const int* devlist);
// Before NCCL finalizes / destroys / aborts the user's communicator: releases topocoll's
// state for it (topology-ring communicator, scratch, routes).
ncclResult_t comm_finalize(ncclComm_t comm);
// NCCL accepted ncclCommFinalize(comm): a revoke of it is refused from now on.
void note_finalize_called(ncclComm_t comm) noexcept;
// Destroy/abort in the order that cannot hang: topocoll's state leaves the registry and its
// topology-ring communicator is destroyed/aborted, then `nccl_release` (pncclCommDestroy or
// pncclCommAbort of the user's communicator) runs, and only then is the device scratch
// freed. cudaFree synchronises the device, so freeing before an abort would wait forever
// for the hung NCCL kernels the abort is meant to kill (PyTorch's watchdog path).
// Returns nccl_release's result; topocoll's own failures are logged, never returned.
ncclResult_t comm_release(ncclComm_t comm, bool abort,
                          ncclResult_t (*nccl_release)(ncclComm_t)) noexcept;

bool interposer_enabled();

// One WARN per process for each distinct fallback reason site.
#define TC_FALLBACK_ONCE(fmt, ...) TC_ONCE(TC_WARN(fmt, ##__VA_ARGS__))

struct CommState;
// Called at the end of preparing a served communicator on this rank (null by default);
// a throw there is a local init failure, which the ready vote shares with every rank. Lets
// tests reach that path without a failing allocation.
using LocalServiceCheck = void (*)(const CommState&);
LocalServiceCheck& local_service_check();

}  // namespace topocoll::plugin::interposer
