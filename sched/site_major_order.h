// Rank orders that keep the ranks of one site (switch, package, host) consecutive.
#pragma once

#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// HD candidate (sched/hd_order.h): ranks sorted by the switch behind them (BiGraph access
// switch, NAP package), then host and GPU, so HD's low distances, which carry its largest
// steps, stay behind one switch. The EFLOPS closed form instead crosses groups at every
// distance, which is optimal when every switch has inter-group links to spare (full
// BiGraph, E <= S) but puts E flows on one link at every step of a partially filled
// cluster (8 ranks behind U0 and L0: load 4 on all six steps where this order has it on
// the two smallest).
std::vector<int> switch_major_order(const topo::Topology& topology, const Placement& placement);

// For the hierarchical and fully connected schedules. NAP: ranks grouped by package
// (package index, then node); other topologies: by host (host, then GPU).
std::vector<int> package_major_order(const topo::Topology& topology, const Placement& placement);

}  // namespace topocoll::sched
