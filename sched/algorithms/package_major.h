// The order the NAP-shaped entries lay their positions on, as an Algorithm::order: package
// by package (sched/site_major_order.h), so neighbouring positions share a package's crossbar.
#pragma once

#include "sched/algorithm_registry.h"
#include "sched/site_major_order.h"

namespace topocoll::sched {

inline RankOrder package_major(const OrderInput& in) {
  RankOrder order;
  order.rank_of_virtual = package_major_order(in.topology, in.placement);
  return order;
}

}  // namespace topocoll::sched
