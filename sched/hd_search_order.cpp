#include "sched/hd_search_order.h"

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>
#include <vector>

#include "sched/eflops_closed_form.h"
#include "sched/host_aware_hd_order.h"
#include "sched/order_search.h"

namespace topocoll::sched {

RankOrder hd_search_order(const topo::Topology& t, const Placement& p, double bytes,
                          RouteCache* routes) {
  std::optional<ClosedFormOrder> closed = eflops_closed_form(t, p);
  if (closed && one_rank_per_host(t, p)) {
    // The doubling steps repeat the halving steps' pairs, so the halving steps are measured
    // and their hops counted twice.
    RankOrder r = evaluate_order(t, p, halving_pattern(p.nranks(), bytes),
                                 std::move(closed->rank_of_virtual), routes);
    r.total_hops *= 2;
    r.closed_form = true;
    // Every HD pair of this order is cross-group and each switch sends E flows per step
    // over S inter-group links, so max(1, E/S) bounds every order of this shape that keeps
    // pairs cross-group; the measured load is reported beside it.
    r.lower_bound = std::max(r.lower_bound, closed->bound);
    return r;
  }
  Pattern pattern = halving_doubling_pattern(p.nranks(), bytes);
  std::vector<std::vector<int>> seeds;
  if (closed) seeds.push_back(std::move(closed->rank_of_virtual));
  if (std::has_single_bit(unsigned(p.nranks()))) {
    std::vector<int> host_major = host_major_order(t, p);
    if (!host_major.empty()) seeds.push_back(std::move(host_major));
  }
  return search_order_from(t, p, pattern, std::move(seeds));
}

}  // namespace topocoll::sched
