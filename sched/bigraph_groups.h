// The placed ranks of a BiGraph by group, switch and slot: the shape the EFLOPS closed form
// (sched/eflops_closed_form.h) and the topology-aware ring (sched/ring_order.h) are
// written over.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// [group][switch][slot] -> communicator rank; group 0 is the upper group, 1 the lower. The
// used switches of a group are compacted in index_in_role order, the ranks behind one
// switch in endpoint order.
using GroupedRanks = std::array<std::vector<std::vector<int>>, 2>;

// nullopt unless the topology is a BiGraph and every rank sits behind an upper or a lower
// switch.
std::optional<GroupedRanks> group_ranks(const topo::Topology& topology, const Placement& placement);

}  // namespace topocoll::sched
