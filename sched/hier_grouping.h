// How the hierarchical schedules (sched/hierarchical.h) group ranks on a topology: by NAP
// package, or by host on a BiGraph of multi-GPU servers. Positions of the package-major
// order (sched/site_major_order.h) then form the groups in turn.
#pragma once

#include <string>

#include "sched/hierarchical.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// Why the ranks cannot be grouped ("" when they can): every group must hold the same
// number of ranks, more than one, and there must be at least two groups.
std::string hier_grouping_refusal(const topo::Topology& topology, const Placement& placement);

// The parameters for a placement hier_grouping_refusal accepts: the group size, `inter`
// across groups, and the torus dimensions when the ranks fill every node of every package
// of a NAP torus (the paper's "local, then vertical, then horizontal").
HierParams hier_params(const topo::Topology& topology, const Placement& placement, InterGroupAlgo inter);

}  // namespace topocoll::sched
