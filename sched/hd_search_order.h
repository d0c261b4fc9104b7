// The HD order by link load alone: the EFLOPS closed form where the ranks fill a full
// power-of-two BiGraph one per host (sched/eflops_closed_form.h), the order search on the
// HD pattern otherwise (sched/order_search.h), seeded with the closed form where the switch
// shape fits and with the host-major order (sched/host_aware_hd_order.h) on multi-GPU hosts.
#pragma once

#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// Worst link load over all steps, then byte-weighted loads, then hops. `bytes` weights the
// steps; `routes` (optional) shares the route cache with the analysis that follows.
RankOrder hd_search_order(const topo::Topology& topology, const Placement& placement,
                          double bytes = 1 << 20, RouteCache* routes = nullptr);

}  // namespace topocoll::sched
