// hier: two-level allreduce (sched/hierarchical.h): reduce-scatter inside each group (NAP
// package, or host of a multi-GPU BiGraph), allreduce across groups (NAP: a ring per torus
// dimension, "local, then vertical, then horizontal"; BiGraph hosts: HD), allgather inside.
// Package-major order; without a topology one rank per group.
#include "sched/algorithm_registry.h"
#include "sched/hier_grouping.h"
#include "sched/algorithms/package_major.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "hier",
    .summary = "two levels: inside each package/host, then across (NAP: rings; hosts: HD)",
    .list_position = 80,
    .collectives = {Collective::AllReduce},
    .auto_collectives = {Collective::AllReduce},
    .refuses = [](const AlgorithmShape& s) {
      return s.topology ? hier_grouping_refusal(*s.topology, *s.placement) : std::string();
    },
    .order = &package_major,
    .build = [](const BuildInput& in) {
      const AlgorithmShape& s = in.shape;
      HierParams params;  // one rank per group, a ring across
      if (s.topology) {
        const bool nap = s.topology->kind() == topo::TopologyKind::Nap;
        params = hier_params(*s.topology, *s.placement,
                             nap ? InterGroupAlgo::Ring : InterGroupAlgo::HalvingDoubling);
      }
      return hierarchical_allreduce(s.nranks, in.count, params, in.order);
    },
});

}  // namespace topocoll::sched
