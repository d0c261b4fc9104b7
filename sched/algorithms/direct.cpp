// direct: the N-1 step direct all-to-all (sched/all_to_all.h; NAP paper Fig. 5), one hop
// per transfer on a crossbar. Package-major order.
#include "sched/algorithm_registry.h"
#include "sched/algorithms/rank_limits.h"
#include "sched/all_to_all.h"
#include "sched/algorithms/package_major.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "direct",
    .summary = "N-1 step direct all-to-all, package-major",
    .list_position = 100,
    .collectives = {Collective::AllToAll},
    .auto_collectives = {Collective::AllToAll},
    .refuses = [](const AlgorithmShape& s) { return direct_rank_refusal(s.nranks); },
    .order = &package_major,
    .build = [](const BuildInput& in) { return direct_all_to_all(in.shape.nranks, in.count, in.order); },
});

}  // namespace topocoll::sched
