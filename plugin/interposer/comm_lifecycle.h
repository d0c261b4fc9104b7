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

}  // namespace topocoll::plugin::interposer
