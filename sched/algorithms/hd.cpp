// hd: Rabenseifner halving-doubling (sched/halving_doubling.h) in the topology-aware HD order
// (EFLOPS, HPCA'20): virtual rank v pairs with v XOR 2^s, laid so that the pairs of every
// step cross the network without sharing a link where the wiring allows (sched/hd_order.h).
#include "sched/algorithm_registry.h"
#include "sched/algorithms/order_variants.h"
#include "sched/halving_doubling.h"
#include "sched/hd_order.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "hd",
    .summary = "halving-doubling (Rabenseifner) in the topology-aware HD order",
    .list_position = 30,
    .collectives = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather},
    .auto_collectives = {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather},
    .order = [](const OrderInput& in) {
      return hd_paired_order(in.topology, in.placement, in.collective, in.bytes, in.routes, [&] {
        return hd_schedule(in.collective, in.placement.nranks(), in.count);
      });
    },
    .build = &build_halving_doubling,
});

}  // namespace topocoll::sched
