#include "sched/ring_order.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "sched/bigraph_groups.h"
#include "sched/order_search.h"
#include "sched/pattern_load.h"

namespace topocoll::sched {

using topo::Topology;

namespace {

Pattern ring_pattern(int n) {
  Pattern pattern(1);
  for (int i = 0; i < n && n > 1; ++i) pattern[0].pairs.emplace_back(i, (i + 1) % n);
  return pattern;
}

}  // namespace

std::vector<int> rank_order_ring(int nranks) {
  std::vector<int> order(std::max(nranks, 0));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

std::vector<int> topology_aware_ring(const Topology& t, const Placement& p) {
  int n = p.nranks();
  std::vector<int> identity = rank_order_ring(n);
  if (n < 3) return identity;
  // Full regular BiGraph, E <= S: round r visits U_i slot r then L_{(i+r) mod S} slot r.
  // Upper->lower hops use links (i, i+r), lower->upper hops (i+r, i+1): over the E rounds
  // no directed link repeats (an Eulerian circuit of the directed K_{S,S} when E = S).
  if (one_rank_per_host(t, p))
    if (std::optional<GroupedRanks> grouped = group_ranks(t, p)) {
      const GroupedRanks& g = *grouped;
      int S = int(g[0].size());
      bool regular = S > 0 && int(g[1].size()) == S;
      int E = regular ? int(g[0][0].size()) : 0;
      for (int grp = 0; grp < 2 && regular; ++grp)
        for (const auto& sw : g[grp]) regular = regular && int(sw.size()) == E;
      if (regular && E <= S) {
        std::vector<int> order;
        for (int r = 0; r < E; ++r)
          for (int i = 0; i < S; ++i) {
            order.push_back(g[0][i][r]);
            order.push_back(g[1][(i + r) % S][r]);
          }
        return order;
      }
    }
  // Otherwise: greedy nearest-neighbour over the same surrogate as the HD search (host
  // neighbours first, they are free), kept only if it beats the rank-order ring.
  Pattern pattern = ring_pattern(n);
  RankOrder base = evaluate_order(t, p, pattern, identity);
  if (n > kMaxSearchRanks || base.max_load <= base.lower_bound + 1e-9) return identity;
  RankOrder found = search_order(t, p, pattern);
  return better_order(found, base) ? found.rank_of_virtual : identity;
}

}  // namespace topocoll::sched
