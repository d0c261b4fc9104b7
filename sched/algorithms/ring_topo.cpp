// ring-topo: the ring of `ring` in topology order (sched/ring_order.h): on a BiGraph every
// hop crosses its own inter-group link, so no two flows of a step share one.
#include "sched/algorithm_registry.h"
#include "sched/algorithms/order_variants.h"
#include "sched/algorithms/rank_limits.h"
#include "sched/ring_order.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "ring-topo",
    .summary = "the same ring in topology order: every hop on its own link",
    .list_position = 20,
    .collectives = kEveryCollective,
    .auto_collectives = kEveryCollective,
    .auto_max_ranks = kMaxAutoRingRanks,
    .refuses = [](const AlgorithmShape& s) { return ring_rank_refusal(s.nranks); },
    .order = [](const OrderInput& in) {
      RankOrder order;
      order.rank_of_virtual = topology_aware_ring(in.topology, in.placement);
      return order;
    },
    .build = &build_ring,
});

}  // namespace topocoll::sched
