#include "sched/hd_order.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "sched/cost_model.h"
#include "sched/halving_doubling.h"
#include "sched/hd_search_order.h"
#include "sched/host_aware_hd_order.h"
#include "sched/nccl_tests_sizes.h"
#include "sched/site_major_order.h"

namespace topocoll::sched {

using topo::Topology;

// The ranking the planner applies between algorithms, applied between orders.
double predicted_hd_us(const Placement& p, std::span<const int> order, double bytes,
                       RouteCache& routes, Collective collective) {
  int n = p.nranks();
  // As the planner counts (nccl-tests sizes), at least one element.
  const bool half = collective == Collective::ReduceScatter || collective == Collective::AllGather;
  const int64_t count = std::max<int64_t>(
      1, count_of_size(half ? collective : Collective::AllReduce, int64_t(bytes), 4, n));
  Schedule s = collective == Collective::ReduceScatter ? hd_reduce_scatter(n, count, order)
               : collective == Collective::AllGather   ? hd_allgather(n, count, order)
                                                       : hd_allreduce(n, count, order);
  return estimate_cost(s, p, 4, routes).total_us;
}

RankOrder hd_order(const Topology& t, const Placement& p, double bytes, RouteCache* routes,
                   Collective collective) {
  if (collective == Collective::AllToAll)
    throw std::invalid_argument("hd_order: there is no halving-doubling all-to-all");
  RankOrder found = hd_search_order(t, p, bytes, routes);
  std::vector<RankOrder> others;
  if (std::optional<RankOrder> host_aware = host_aware_hd_order(t, p, bytes, routes, collective))
    others.push_back(std::move(*host_aware));
  if (p.nranks() >= 4 && p.nranks() <= 8192 && std::has_single_bit(unsigned(p.nranks()))) {
    std::vector<int> order = switch_major_order(t, p);
    // Reduce-scatter and allgather alone run distance q/2 first: bit-reversed virtual ranks
    // put their heavy steps behind one switch (as host_aware_hd_order does).
    if (collective != Collective::AllReduce) order = bit_reversed_order(order);
    others.push_back(evaluate_order(t, p, halving_doubling_pattern(p.nranks(), bytes),
                                    std::move(order), routes));
  }
  std::optional<RouteCache> own;
  RouteCache& cache = routes ? *routes : own.emplace(t);
  double best_us = -1;
  for (RankOrder& other : others) {
    if (other.rank_of_virtual == found.rank_of_virtual) continue;
    if (best_us < 0) best_us = predicted_hd_us(p, found.rank_of_virtual, bytes, cache, collective);
    const double us = predicted_hd_us(p, other.rank_of_virtual, bytes, cache, collective);
    if (us < best_us * (1 - 1e-9)) {
      best_us = us;
      found = std::move(other);
    }
  }
  return found;
}

}  // namespace topocoll::sched
