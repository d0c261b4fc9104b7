#include "sched/pattern_load.h"

#include <algorithm>
#include <bit>
#include <optional>

namespace topocoll::sched {

using topo::LinkKind;
using topo::Topology;

namespace {

// Rabenseifner: halving at distance 1, 2, ... moves bytes/2, bytes/4, ...; doubling mirrors.
Pattern hd_pattern(int nranks, double bytes, bool with_doubling) {
  Pattern pattern;
  if (nranks < 2) return pattern;
  int p = int(std::bit_floor(unsigned(nranks)));
  int k = std::countr_zero(unsigned(p));
  auto step = [&](int s, double b) {
    PatternStep st;
    st.bytes = b;
    st.pairs.resize(p);
    for (int v = 0; v < p; ++v) st.pairs[v] = {v, v ^ (1 << s)};
    pattern.push_back(std::move(st));
  };
  for (int s = 0; s < k; ++s) step(s, bytes / double(2 << s));
  if (with_doubling)
    for (int s = k - 1; s >= 0; --s) step(s, bytes / double(2 << s));
  return pattern;
}

double pattern_lower_bound(const Topology& t, const Placement& p, const Pattern& pattern) {
  // Any flow that must leave its host occupies one of its endpoint's network links; an
  // endpoint with d network out-links then has one carrying >= 1/d flow. A rank has to leave
  // its host when it talks to more distinct peers than its host has other ranks.
  int max_host = 1;
  {
    std::vector<int> per_host(t.hosts().size() + 1, 0);
    for (int e : p.endpoint_of_rank) {
      int h = t.endpoints()[e].host_index;
      max_host = std::max(max_host, ++per_host[h < 0 ? t.hosts().size() : size_t(h)]);
    }
  }
  bool must_leave = false;
  if (max_host == 1) {
    for (const auto& st : pattern)
      for (auto [a, b] : st.pairs) must_leave = must_leave || a != b;
  } else {
    std::vector<std::vector<int>> peers(p.nranks());
    for (const auto& st : pattern)
      for (auto [a, b] : st.pairs) peers[a].push_back(b);
    for (auto& list : peers) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
      if (int(list.size()) > max_host - 1) must_leave = true;
    }
  }
  if (!must_leave) return 0;
  int max_degree = 1;
  std::vector<int> degree(t.endpoints().size(), 0);
  for (const auto& l : t.links())
    if (contends(l) && l.from.type == topo::NodeRef::Type::Endpoint)
      max_degree = std::max(max_degree, ++degree[l.from.index]);
  // The closed form's shape-specific bound, max(1, E/S) on a full BiGraph, is reported by
  // sched/hd_search_order.h beside this one.
  return 1.0 / max_degree;
}

}  // namespace

Pattern halving_doubling_pattern(int nranks, double bytes) { return hd_pattern(nranks, bytes, true); }

Pattern halving_pattern(int nranks, double bytes) { return hd_pattern(nranks, bytes, false); }

bool contends(const topo::Link& l) { return l.kind != LinkKind::HostFabric; }

RankOrder evaluate_order(const Topology& t, const Placement& p, const Pattern& pattern,
                         std::vector<int> rank_of_virtual, RouteCache* shared_routes) {
  RankOrder out;
  out.rank_of_virtual = std::move(rank_of_virtual);
  std::optional<RouteCache> own;
  RouteCache& routes = shared_routes ? *shared_routes : own.emplace(t);
  StepLinkLoads loads(int(t.links().size()));
  std::vector<char> counted(t.links().size());
  for (const auto& l : t.links()) counted[l.id] = contends(l);
  for (const auto& st : pattern) {
    loads.clear();
    for (auto [a, b] : st.pairs) {
      int ea = p.endpoint_of_rank[out.rank_of_virtual[a]];
      int eb = p.endpoint_of_rank[out.rank_of_virtual[b]];
      loads.add(routes, ea, eb, 1.0);
      for (const auto& path : loads.scratch_paths())
        path.for_each_link([&](int l) { out.total_hops += counted[l]; });
    }
    for (int l : loads.touched())
      if (counted[l]) out.max_load = std::max(out.max_load, loads.flows(l));
  }
  out.lower_bound = pattern_lower_bound(t, p, pattern);
  return out;
}

bool better_order(const RankOrder& a, const RankOrder& b) {
  if (a.max_load < b.max_load - 1e-9) return true;
  if (a.max_load > b.max_load + 1e-9) return false;
  return a.total_hops < b.total_hops;
}

}  // namespace topocoll::sched
