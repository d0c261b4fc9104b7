// What the user does to a served communicator that the topology-ordered split (ring_comm.h)
// must see too: buffers registered with ncclCommRegister are registered on the split as
// well (and deregistered with it), an asynchronous error of the split is reported by
// ncclCommGetAsyncError on the user's communicator, and ncclCommRevoke revokes both (having
// stopped topocoll's calls on it first: release_fence.h).
#pragma once

#include <nccl.h>

#include <cstddef>

namespace topocoll::plugin::interposer {

struct CommState;

ncclResult_t comm_register(ncclComm_t comm, void* buff, std::size_t size, void** handle);
ncclResult_t comm_deregister(ncclComm_t comm, void* handle);
// The user's communicator's error, else the split's (other than ncclInProgress).
ncclResult_t comm_async_error(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t comm_revoke(ncclComm_t comm, int flags);
// Stops topocoll's calls on the user's communicator (release_fence.h) and revokes the
// split alone: before ncclCommShrink(NCCL_SHRINK_ABORT), which ends the user
// communicator's operations and then waits for its device stream, behind which a split's
// kernel hung on a dead peer would keep it waiting forever.
void revoke_ring_comm(ncclComm_t comm);
// For ncclCommShrink(NCCL_SHRINK_ABORT), after revoke_ring_comm and before NCCL's shrink:
// NCCL resets the user's communicator's abort flags and keeps it usable (init.cc
// ncclCommShrink), while topocoll's state of it is not (a vote ended by the abort may have
// been read on some ranks only, its split is revoked): its calls go to NCCL unchanged from
// now on, rather than fail, and its out-of-step mark is dropped first, served or not: NCCL's
// shrink asks ncclCommGetAsyncError (ncclCommEnsureReady, through the interposed symbol),
// which would otherwise fail the shrink, and every retry of it.
void leave_to_nccl_for_shrink_abort(ncclComm_t comm);

// Registers on a just-made split every buffer registered so far on the user's
// communicator, then makes it state's ring_comm: nothing touches it after it is published,
// when a release may take it (release_fence.h, adopt_ring_comm).
void publish_ring_comm(CommState& state, ncclComm_t made);

}  // namespace topocoll::plugin::interposer
