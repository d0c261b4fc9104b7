// Builders shared by entries that differ only in their order: `ring` and `ring-topo`, `hd` and
// `hd-naive`. Sharing the function says so to the suites too: without a topology there is no
// order, so they build the same schedule and the generator suites run it once
// (tests/exec/generator_list.h).
#pragma once

#include "sched/algorithm_registry.h"
#include "sched/halving_doubling.h"
#include "sched/ring.h"

namespace topocoll::sched {

inline Schedule build_ring(const BuildInput& in) {
  return ring_schedule(in.shape.collective, in.shape.nranks, in.count, in.order);
}

inline Schedule build_halving_doubling(const BuildInput& in) {
  return hd_schedule(in.shape.collective, in.shape.nranks, in.count, in.order);
}

}  // namespace topocoll::sched
