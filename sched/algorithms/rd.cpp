// rd: recursive-doubling allreduce (sched/recursive_doubling.h): log2 P whole-vector
// exchanges, half HD's steps, so it wins where a step's fixed cost dominates (small
// messages). Its pairs are HD's (v XOR 2^s), so HD's order serves it.
#include "sched/algorithm_registry.h"
#include "sched/hd_order.h"
#include "sched/recursive_doubling.h"

namespace topocoll::sched {

TOPOCOLL_ALGORITHM({
    .name = "rd",
    .summary = "recursive doubling, whole vectors (small messages), in the HD order",
    .list_position = 50,
    .collectives = {Collective::AllReduce},
    .auto_collectives = {Collective::AllReduce},
    .order = [](const OrderInput& in) {
      return hd_paired_order(in.topology, in.placement, in.collective, in.bytes, in.routes, [&] {
        return rd_allreduce(in.placement.nranks(), in.count);
      });
    },
    .build = [](const BuildInput& in) { return rd_allreduce(in.shape.nranks, in.count, in.order); },
});

}  // namespace topocoll::sched
