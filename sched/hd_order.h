// The HD order (virtual rank -> communicator rank) the planner uses, chosen among
// candidates by the cost model (sched/cost_model.h): the link-load search's order
// (sched/hd_search_order.h), the host-aware order on multi-GPU hosts
// (sched/host_aware_hd_order.h) and the switch-major order (sched/site_major_order.h).
// Virtual rank v exchanges with v XOR 2^s at step s (EFLOPS, HPCA'20, topology-aware
// halving-doubling; distance 1 first, as sched/halving_doubling.h).
//
// Why rank by time and not by worst load: the search ranks all steps alike, so it keeps the
// network on the heavy first steps whenever a switch- or host-local order has a higher
// worst load on some later, lighter step; the cost model weighs each step by its bytes
// (perf/results/hd-multi-gpu.md: about 2x on 4- and 8-GPU servers).
#pragma once

#include <span>

#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

// The fastest candidate for the HD `collective` of `bytes` (nccl-tests size; ties: the
// search's). `bytes` also weights the steps in the search. `routes` (optional) shares the
// route cache with the analysis that follows. Throws std::invalid_argument for AllToAll.
RankOrder hd_order(const topo::Topology& topology, const Placement& placement,
                   double bytes = 1 << 20, RouteCache* routes = nullptr,
                   Collective collective = Collective::AllReduce);

// The cost model's time (us) for the HD `collective` of `bytes` (4-byte elements, nccl-tests
// size) under an order: the ranking hd_order applies between its candidates.
double predicted_hd_us(const Placement& placement, std::span<const int> rank_of_virtual,
                       double bytes, RouteCache& routes,
                       Collective collective = Collective::AllReduce);

}  // namespace topocoll::sched
