// A communicator's topocoll life: after NCCL creates it, the init exchange decides on every
// rank alike whether topocoll serves it (rank_exchange.h) and prepares what serving needs;
// at destroy/abort its state leaves the registry. The exported entry points reach this
// through interposer.h; group_end runs the inits queued inside a user group.
#pragma once

#include <vector>

#include "plugin/interposer/thread_group.h"

namespace topocoll::plugin::interposer {

// Runs the init exchange for communicators NCCL has finished creating (emptied first).
void finish_inits(std::vector<PendingInit>& pending);
// At the outermost group end, with NCCL's result of it: the splits and shrinks made in the
// group, whose handles NCCL has now written, go through comm_created (emptied first).
void children_created(std::vector<PendingChild>& pending, ncclResult_t group_result);
// At an outermost group end NCCL failed: the group's inits are registered unserved, with no
// exchange and no query (emptied first).
void inits_failed_in_group(std::vector<PendingInit>& pending, ncclResult_t group_result);
// At an outermost ncclGroupSimulateEnd: NCCL made the group's communicators (not its
// failed ones): registered unserved, with no exchange and no query (both emptied first).
void comms_created_in_simulated_group(std::vector<PendingInit>& inits, std::vector<PendingChild>& children,
                                      ncclResult_t group_result);

}  // namespace topocoll::plugin::interposer
