// The topology-ordered communicator (route nccl-topo-ring): NCCL's own collective on a
// communicator split from the user's in topology ring order, with the blocks of
// reduce-scatter and allgather permuted between the two rank orders.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <vector>

#include "plugin/interposer/thread_group.h"

namespace topocoll::plugin::interposer {

struct CommState;
struct WaitLimit;

// Splits each state's communicator in topology ring order (ring_comm), all in one NCCL
// group (one thread may drive several ranks), then votes on the outcome over the user's
// communicator: a split is adopted only when every rank made one. A failure on any rank
// marks ring_comm_failed on every rank: its calls then stay on the user's communicator.
// The vote waits for the peers up to `limit` (rank_exchange.h): a rank that cannot know
// the outcome then reports the communicator out of step.
void create_ring_comms(const std::vector<CommState*>& states, const WaitLimit& limit);

// The batch's nccl-topo-ring calls, as NCCL would deliver them on the user's communicator.
// Calls whose communicator an abort from another thread began on while the split was made
// are taken out of `calls` and not run (ncclInvalidUsage).
ncclResult_t run_ring_calls(std::vector<PendingCollective>& calls);

}  // namespace topocoll::plugin::interposer
