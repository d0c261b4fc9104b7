#include "sched/bigraph_groups.h"

#include <algorithm>
#include <utility>

namespace topocoll::sched {

using topo::SwitchRole;
using topo::Topology;

namespace {

int group_of(const Topology& t, int endpoint) {
  int sw = t.endpoints()[endpoint].attach_switch;
  if (sw < 0) return -1;
  SwitchRole r = t.switches()[sw].role;
  return r == SwitchRole::Upper ? 0 : r == SwitchRole::Lower ? 1 : -1;
}

}  // namespace

std::optional<GroupedRanks> group_ranks(const Topology& t, const Placement& p) {
  if (t.kind() != topo::TopologyKind::BiGraph) return std::nullopt;
  // Ranks per switch in endpoint order, then the used switches of each group compacted in
  // index_in_role order.
  std::vector<std::vector<std::pair<int, int>>> by_switch(t.switches().size());
  for (int r = 0; r < p.nranks(); ++r) {
    int e = p.endpoint_of_rank[r];
    if (group_of(t, e) < 0) return std::nullopt;
    by_switch[t.endpoints()[e].attach_switch].emplace_back(e, r);
  }
  std::array<std::vector<std::pair<int, int>>, 2> used;  // (index_in_role, switch)
  for (int sw = 0; sw < int(by_switch.size()); ++sw) {
    if (by_switch[sw].empty()) continue;
    int g = t.switches()[sw].role == SwitchRole::Upper ? 0 : 1;
    used[g].emplace_back(t.switches()[sw].index_in_role, sw);
  }
  GroupedRanks out;
  for (int g = 0; g < 2; ++g) {
    std::sort(used[g].begin(), used[g].end());
    for (auto [idx, sw] : used[g]) {
      auto& list = by_switch[sw];
      std::sort(list.begin(), list.end());
      std::vector<int> ranks;
      ranks.reserve(list.size());
      for (auto [e, r] : list) ranks.push_back(r);
      out[g].push_back(std::move(ranks));
    }
  }
  return out;
}

}  // namespace topocoll::sched
