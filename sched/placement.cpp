#include "sched/placement.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace topocoll::sched {

using topo::Topology;

Placement place_ranks(const Topology& topology, std::span<const RankLocation> ranks) {
  Placement p;
  std::vector<int> owner(topology.endpoints().size(), -1);
  for (int r = 0; r < int(ranks.size()); ++r) {
    auto e = topology.find_endpoint(ranks[r].host, ranks[r].gpu);
    if (!e)
      throw std::invalid_argument("rank " + std::to_string(r) + " (host \"" + ranks[r].host +
                                  "\", GPU " + std::to_string(ranks[r].gpu) +
                                  ") is not an endpoint of topology \"" + topology.name() + "\"");
    if (owner[*e] >= 0)
      throw std::invalid_argument("rank " + std::to_string(r) + " (host \"" + ranks[r].host +
                                  "\", GPU " + std::to_string(ranks[r].gpu) +
                                  ") is on the same endpoint as rank " + std::to_string(owner[*e]));
    owner[*e] = r;
    p.endpoint_of_rank.push_back(*e);
  }
  return p;
}

Placement first_endpoints(const Topology& topology, int nranks) {
  int n = int(topology.endpoints().size());
  if (nranks < 1 || nranks > n)
    throw std::invalid_argument("ranks: " + std::to_string(nranks) + " is out of range; topology \"" +
                                topology.name() + "\" has " + std::to_string(n) + " endpoints");
  Placement p;
  p.endpoint_of_rank.resize(nranks);
  std::iota(p.endpoint_of_rank.begin(), p.endpoint_of_rank.end(), 0);
  return p;
}

Placement explicit_endpoints(const Topology& topology, std::vector<int> endpoint_of_rank) {
  int n = int(topology.endpoints().size());
  std::vector<int> owner(n, -1);
  for (int r = 0; r < int(endpoint_of_rank.size()); ++r) {
    int e = endpoint_of_rank[r];
    if (e < 0 || e >= n)
      throw std::invalid_argument("rank " + std::to_string(r) + ": endpoint " + std::to_string(e) +
                                  " is out of range (topology has " + std::to_string(n) + ")");
    if (owner[e] >= 0)
      throw std::invalid_argument("rank " + std::to_string(r) + ": endpoint " +
                                  topology.endpoints()[e].id + " is already rank " +
                                  std::to_string(owner[e]));
    owner[e] = r;
  }
  return Placement{std::move(endpoint_of_rank)};
}

bool one_rank_per_host(const Topology& t, const Placement& p) {
  std::vector<int> per_host(t.hosts().size() + 1, 0);
  for (int e : p.endpoint_of_rank) {
    int h = t.endpoints()[e].host_index;
    if (h < 0) continue;
    if (++per_host[h] > 1) return false;
  }
  return true;
}

}  // namespace topocoll::sched
