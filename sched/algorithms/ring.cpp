// ring: the ring in rank order, position i sending to i+1 (sched/ring.h; all-to-all: store
// and forward, sched/all_to_all.h). What NCCL builds, so the honest baseline; on a BiGraph
// its hops share links, which ring-topo avoids.
#include "sched/algorithm_registry.h"
#include "sched/algorithms/order_variants.h"
#include "sched/algorithms/rank_limits.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "ring",
    .summary = "ring in rank order, what NCCL builds (all-to-all: store and forward)",
    .list_position = 10,
    .collectives = kEveryCollective,
    .auto_collectives = kEveryCollective,
    .auto_max_ranks = kMaxAutoRingRanks,
    .refuses = [](const AlgorithmShape& s) { return ring_rank_refusal(s.nranks); },
    .build = &build_ring,
});

}  // namespace topocoll::sched
