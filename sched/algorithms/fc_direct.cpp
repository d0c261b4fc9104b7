// fc-direct: direct reduce-scatter + allgather on a crossbar (sched/fc_direct.h), one step a
// phase, bandwidth-optimal where every pair has its own path (a NAP package, NVSwitch);
// all-to-all direct. Package-major order.
#include "sched/algorithm_registry.h"
#include "sched/algorithms/rank_limits.h"
#include "sched/all_to_all.h"
#include "sched/fc_direct.h"
#include "sched/algorithms/package_major.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "fc-direct",
    .summary = "direct reduce-scatter + allgather on a crossbar, package-major",
    .list_position = 70,
    .collectives = kEveryCollective,
    .auto_collectives = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather},
    .refuses = [](const AlgorithmShape& s) { return direct_rank_refusal(s.nranks); },
    .order = &package_major,
    .build = [](const BuildInput& in) {
      const Collective collective = in.shape.collective;
      const int n = in.shape.nranks;
      switch (collective) {
        case Collective::AllReduce: return fc_direct_allreduce(n, in.count, in.order);
        case Collective::ReduceScatter: return fc_direct_reduce_scatter(n, in.count, in.order);
        case Collective::AllGather: return fc_direct_allgather(n, in.count, in.order);
        case Collective::AllToAll: break;
      }
      return direct_all_to_all(n, in.count, in.order);
    },
});

}  // namespace topocoll::sched
