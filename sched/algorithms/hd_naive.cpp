// hd-naive: the halving-doubling of `hd` in rank order: what HD costs on the network without
// the topology-aware order (the comparison the EFLOPS paper makes).
#include "sched/algorithm_registry.h"
#include "sched/algorithms/order_variants.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "hd-naive",
    .summary = "the same halving-doubling in rank order (for comparison)",
    .list_position = 40,
    .collectives = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather},
    .auto_collectives = {},  // a comparison: hd is the same schedule in a better order
    .build = &build_halving_doubling,
});

}  // namespace topocoll::sched
