// Placement: which topology endpoint each communicator rank runs on. The bottom of sched/:
// the contention analysis (sched/link_load.h) and the cost model route a schedule's flows
// through it. The rank orders chosen over a placement sit above the cost model
// (sched/hd_order.h, sched/ring_order.h, sched/site_major_order.h).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace topocoll::sched {

// How a communicator rank knows itself: the host name and CUDA device index it reports.
struct RankLocation {
  std::string host;
  int gpu = 0;
};

struct Placement {
  std::vector<int> endpoint_of_rank;  // communicator rank -> endpoint index

  int nranks() const { return int(endpoint_of_rank.size()); }
};

// Looks every rank up in the topology; throws std::invalid_argument naming the first rank
// whose host/GPU is not there or whose endpoint is already taken by another rank.
Placement place_ranks(const topo::Topology& topology, std::span<const RankLocation> ranks);
// Ranks 0..n-1 on endpoints 0..n-1 (a partially filled cluster); throws when n is out of range.
Placement first_endpoints(const topo::Topology& topology, int nranks);
// Explicit endpoint indices; throws on an out-of-range or repeated endpoint.
Placement explicit_endpoints(const topo::Topology& topology, std::vector<int> endpoint_of_rank);

// No host holds two ranks (endpoints outside any host are not counted).
bool one_rank_per_host(const topo::Topology& topology, const Placement& placement);

}  // namespace topocoll::sched
