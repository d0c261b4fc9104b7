// fc: NAP's whole-vector log-step allreduce and allgather for a package whose nodes are fully
// connected (sched/nap_log_step.h, paper Figs. 7-8), and its direct all-to-all (Fig. 5), in
// package-major order.
#include <string>

#include "sched/algorithm_registry.h"
#include "sched/algorithms/rank_limits.h"
#include "sched/all_to_all.h"
#include "sched/nap_log_step.h"
#include "sched/algorithms/package_major.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "fc",
    .summary = "NAP whole-vector log-step (all-to-all: direct), package-major",
    .list_position = 60,
    .collectives = {Collective::AllReduce, Collective::AllGather, Collective::AllToAll},
    .auto_collectives = {Collective::AllReduce, Collective::AllGather},
    .refuses = [](const AlgorithmShape& s) {
      return s.nranks > kMaxDirectRanks ? "more than " + std::to_string(kMaxDirectRanks) + " ranks" : std::string();
    },
    .order = &package_major,
    .build = [](const BuildInput& in) {
      const Collective collective = in.shape.collective;
      const int n = in.shape.nranks;
      if (collective == Collective::AllReduce) return log_step_allreduce(n, in.count, in.order);
      if (collective == Collective::AllGather) return log_step_allgather(n, in.count, in.order);
      return direct_all_to_all(n, in.count, in.order);
    },
});

}  // namespace topocoll::sched
