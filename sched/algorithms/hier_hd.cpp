// hier-hd: `hier` on NAP with halving-doubling across packages instead of the rings (BiGraph
// hier already uses HD across hosts). Package-major order; without a topology one rank per
// group.
#include "sched/algorithm_registry.h"
#include "sched/hier_grouping.h"
#include "sched/algorithms/package_major.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "hier-hd",
    .summary = "hier with HD across NAP packages",
    .list_position = 90,
    .collectives = {Collective::AllReduce},
    .auto_collectives = {Collective::AllReduce},
    .refuses = [](const AlgorithmShape& s) {
      if (!s.topology) return std::string();
      if (std::string why = hier_grouping_refusal(*s.topology, *s.placement); !why.empty()) return why;
      if (s.topology->kind() != topo::TopologyKind::Nap)
        return std::string("the NAP variant of hier (on BiGraph, hier already runs HD across hosts)");
      return std::string();
    },
    .order = &package_major,
    .build = [](const BuildInput& in) {
      const AlgorithmShape& s = in.shape;
      HierParams params;  // one rank per group
      params.inter = InterGroupAlgo::HalvingDoubling;
      if (s.topology) params = hier_params(*s.topology, *s.placement, InterGroupAlgo::HalvingDoubling);
      return hierarchical_allreduce(s.nranks, in.count, params, in.order);
    },
});

}  // namespace topocoll::sched
