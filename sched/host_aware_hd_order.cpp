#include "sched/host_aware_hd_order.h"

#include <algorithm>
#include <bit>
#include <map>
#include <utility>

#include "sched/halving_doubling.h"
#include "sched/order_search.h"

namespace topocoll::sched {

using topo::Topology;

std::vector<int> host_major_order(const Topology& t, const Placement& p, int* log2_g,
                                  bool parity_flip) {
  int n = p.nranks();
  std::map<int, std::vector<std::pair<int, int>>> by_host;  // host -> (endpoint, rank)
  for (int r = 0; r < n; ++r) by_host[t.endpoints()[p.endpoint_of_rank[r]].host_index].emplace_back(p.endpoint_of_rank[r], r);
  int g = int(by_host.begin()->second.size());
  int hosts = int(by_host.size());
  if (g < 2 || !std::has_single_bit(unsigned(g)) || !std::has_single_bit(unsigned(hosts)))
    return {};
  for (auto& [h, list] : by_host) {
    if (int(list.size()) != g) return {};
    std::sort(list.begin(), list.end());
  }
  std::vector<std::vector<std::pair<int, int>>> host_list;
  for (auto& [h, list] : by_host) host_list.push_back(list);
  int lg = std::countr_zero(unsigned(g));
  std::vector<int> order(n);
  for (int v = 0; v < n; ++v) {
    int h = v >> lg, l = v & (g - 1);
    order[v] = host_list[h][l ^ (parity_flip ? std::popcount(unsigned(h)) & 1 : 0)].second;
  }
  if (log2_g) *log2_g = lg;
  return order;
}

// The host-major order, then a search that only moves whole hosts or GPUs within a host, so
// steps 0..log2(G)-1 stay on the host fabric and the host-level steps, where each GPU index
// runs its own HD among the hosts, get spread over distinct inter-group links where the
// shape allows.
std::optional<RankOrder> host_aware_hd_order(const Topology& t, const Placement& p, double bytes,
                                             RouteCache* routes, Collective collective) {
  // The search's size limit; fewer than two ranks have no order to choose. Reduce-scatter
  // and allgather alone: their schedules hold P^2 ops under a scrambling order
  // (sched/halving_doubling.h), too many to build twice for ranking above 1024.
  if (p.nranks() < 2 ||
      p.nranks() > (collective == Collective::AllReduce ? kMaxSearchRanks : 1024))
    return std::nullopt;
  Pattern pattern = halving_doubling_pattern(p.nranks(), bytes);
  int lg = 0;
  if (host_major_order(t, p, &lg).empty()) return std::nullopt;
  int n = p.nranks();
  // Up to 1024 ranks: two seeds (with and without the parity flip) and two swap sequences
  // each, since the structured moves are few and one start often settles above the load a
  // second one finds; larger counts: one start. The starts together get the search's swap
  // budget (at least 4096 pair swaps each, which is instant), so plan time stays of the
  // order of the search's. Best by worst load, then hops.
  const int starts = n <= 1024 ? 4 : 1;
  const int64_t budget = std::max<int64_t>(default_swap_budget(n) / starts, 4096);
  std::optional<RankOrder> best;
  for (int start = 0; start < starts; ++start) {
    std::vector<int> order = host_major_order(t, p, nullptr, /*parity_flip=*/start < 2);
    if (n > (1 << lg))
      search_host_blocks(t, p, pattern, order, budget, lg, start % 2 ? 54321u : 12345u);
    RankOrder r = evaluate_order(t, p, pattern, std::move(order), routes);
    if (!best || better_order(r, *best)) best = std::move(r);
    if (n == (1 << lg)) break;  // one host: nothing to search
  }
  // Reduce-scatter and allgather alone: the host-local pairs onto their heavy first steps.
  if (collective != Collective::AllReduce)
    best->rank_of_virtual = bit_reversed_order(best->rank_of_virtual);
  return best;
}

}  // namespace topocoll::sched
