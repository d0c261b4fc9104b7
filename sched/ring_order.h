// Ring orders (position i sends to position i + 1): the rank order NCCL builds, and the
// topology-aware ring that is the honest baseline on a BiGraph.
#pragma once

#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// 0, 1, ..., n-1.
std::vector<int> rank_order_ring(int nranks);

// Every hop crosses one inter-group link, each directed link at most once where the shape
// allows (an Eulerian circuit of the directed complete bipartite switch graph); otherwise
// the order search on the ring pattern (sched/order_search.h), kept only where it beats
// the rank order, so ranks on one host stay adjacent.
std::vector<int> topology_aware_ring(const topo::Topology& topology, const Placement& placement);

}  // namespace topocoll::sched
