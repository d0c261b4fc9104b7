#include "sched/placement.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>

#include "sched/cost_model.h"
#include "sched/halving_doubling.h"
#include "sched/link_load.h"
#include "sched/nccl_tests_sizes.h"

namespace topocoll::sched {

using topo::LinkKind;
using topo::SwitchRole;
using topo::Topology;

// ---------------------------------------------------------------------------------------
// Rank -> endpoint

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

// ---------------------------------------------------------------------------------------
// Patterns and their evaluation

// Rabenseifner: halving at distance 1, 2, ... moves bytes/2, bytes/4, ...; doubling mirrors.
static Pattern hd_pattern(int nranks, double bytes, bool with_doubling) {
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

Pattern halving_doubling_pattern(int nranks, double bytes) { return hd_pattern(nranks, bytes, true); }

namespace {

// Host fabric links are free for the order problem (the network is what contends).
bool counts(const topo::Link& l) { return l.kind != LinkKind::HostFabric; }

bool alone_on_host(const Topology& t, const Placement& p) {
  std::vector<int> per_host(t.hosts().size() + 1, 0);
  for (int e : p.endpoint_of_rank) {
    int h = t.endpoints()[e].host_index;
    if (h < 0) continue;
    if (++per_host[h] > 1) return false;
  }
  return true;
}

int group_of(const Topology& t, int endpoint) {
  int sw = t.endpoints()[endpoint].attach_switch;
  if (sw < 0) return -1;
  SwitchRole r = t.switches()[sw].role;
  return r == SwitchRole::Upper ? 0 : r == SwitchRole::Lower ? 1 : -1;
}

// Placed ranks of a BiGraph as [group][switch][slot] -> rank, switches and slots compacted
// in index order. Empty when some rank is not behind a BiGraph switch.
using GroupedRanks = std::array<std::vector<std::vector<int>>, 2>;
bool group_ranks(const Topology& t, const Placement& p, GroupedRanks& out) {
  if (t.kind() != topo::TopologyKind::BiGraph) return false;
  // Ranks per switch in endpoint order, then the used switches of each group compacted in
  // index_in_role order.
  std::vector<std::vector<std::pair<int, int>>> by_switch(t.switches().size());
  for (int r = 0; r < p.nranks(); ++r) {
    int e = p.endpoint_of_rank[r];
    if (group_of(t, e) < 0) return false;
    by_switch[t.endpoints()[e].attach_switch].emplace_back(e, r);
  }
  std::array<std::vector<std::pair<int, int>>, 2> used;  // (index_in_role, switch)
  for (int sw = 0; sw < int(by_switch.size()); ++sw) {
    if (by_switch[sw].empty()) continue;
    int g = t.switches()[sw].role == SwitchRole::Upper ? 0 : 1;
    used[g].emplace_back(t.switches()[sw].index_in_role, sw);
  }
  for (int g = 0; g < 2; ++g) {
    std::sort(used[g].begin(), used[g].end());
    out[g].clear();
    for (auto [idx, sw] : used[g]) {
      auto& list = by_switch[sw];
      std::sort(list.begin(), list.end());
      std::vector<int> ranks;
      ranks.reserve(list.size());
      for (auto [e, r] : list) ranks.push_back(r);
      out[g].push_back(std::move(ranks));
    }
  }
  return true;
}

}  // namespace

static double pattern_lower_bound(const Topology& t, const Placement& p, const Pattern& pattern) {
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
    if (counts(l) && l.from.type == topo::NodeRef::Type::Endpoint)
      max_degree = std::max(max_degree, ++degree[l.from.index]);
  double bound = 1.0 / max_degree;
  // BiGraph with every rank alone on its host and split evenly over S switches per group,
  // E ranks per switch, for patterns whose every pair is cross-group (HD): each switch sends
  // E flows per step over S inter-group links.
  return bound;
}

RankOrder evaluate_order(const Topology& t, const Placement& p, const Pattern& pattern,
                         std::vector<int> rank_of_virtual, RouteCache* shared_routes) {
  RankOrder out;
  out.rank_of_virtual = std::move(rank_of_virtual);
  std::optional<RouteCache> own;
  RouteCache& routes = shared_routes ? *shared_routes : own.emplace(t);
  StepLinkLoads loads(int(t.links().size()));
  std::vector<char> counted(t.links().size());
  for (const auto& l : t.links()) counted[l.id] = counts(l);
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

// ---------------------------------------------------------------------------------------
// EFLOPS closed form, generalised to S = 2^a switches and E = 2^b ranks per switch per group
// (n = 2SE). Upper-group v (even popcount): switch = bits [0,a), slot = bits [a,a+b);
// lower-group v: switch = bits [b,a+b), slot = bits [0,b). With a = b = m this is the
// paper's form. For every step s the map from an upper v to its link (switch(v),
// switch(v ^ 2^s)) is one-to-one when b <= a (the bits [0,a) and [b,a+b) cover v), so each
// directed inter-group link carries one flow; when b > a it carries E/S, which is also the
// bound (E flows leave a switch over S links every step).

static bool closed_form_order(const Topology& t, const Placement& p, std::vector<int>& order,
                              double& bound) {
  int n = p.nranks();
  if (n < 2 || !std::has_single_bit(unsigned(n))) return false;
  GroupedRanks g;
  if (!group_ranks(t, p, g)) return false;
  int S = int(g[0].size());
  if (S == 0 || int(g[1].size()) != S || !std::has_single_bit(unsigned(S))) return false;
  int E = int(g[0][0].size());
  for (int grp = 0; grp < 2; ++grp)
    for (const auto& sw : g[grp])
      if (int(sw.size()) != E) return false;
  if (!std::has_single_bit(unsigned(E)) || 2 * S * E != n) return false;
  int a = std::countr_zero(unsigned(S)), b = std::countr_zero(unsigned(E));
  unsigned low_mask = (1u << (a + b)) - 1;
  bound = std::max(1.0, double(E) / S);
  order.assign(n, -1);
  for (int v = 0; v < n; ++v) {
    unsigned low = unsigned(v) & low_mask;
    if (std::popcount(unsigned(v)) % 2 == 0)
      order[v] = g[0][low & (S - 1)][(low >> a) & (E - 1)];
    else
      order[v] = g[1][(low >> b) & (S - 1)][low & (E - 1)];
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Search: greedy construction, then pairwise swaps. The swaps minimise a smooth surrogate,
// sum over steps and links of weight_s * load^4, whose steepness puts the worst load first;
// the step weight (1 + bytes_s / max bytes) prefers relieving the steps that move the most
// data, which is where intra-host (free fabric) pairs end up. The exact worst load is
// measured at the end.

namespace {

struct Adjacent {
  int step, peer;
  bool out;  // this virtual rank sends to peer
};

class OrderSearch {
 public:
  OrderSearch(const Topology& t, const Placement& p, const Pattern& pattern)
      : t_(t), p_(p), pattern_(pattern), routes_(t), n_(p.nranks()),
        nlinks_(int(t.links().size())) {
    double max_bytes = 0;
    for (const auto& st : pattern) max_bytes = std::max(max_bytes, st.bytes);
    for (const auto& st : pattern) weight_.push_back(1.0 + (max_bytes > 0 ? st.bytes / max_bytes : 0));
    adj_.resize(n_);
    for (int s = 0; s < int(pattern.size()); ++s)
      for (auto [a, b] : pattern[s].pairs) {
        adj_[a].push_back({s, b, true});
        adj_[b].push_back({s, a, false});
      }
    load_.assign(size_t(pattern.size()) * nlinks_, 0.0);
    counted_.resize(nlinks_);
    for (int l = 0; l < nlinks_; ++l) counted_[l] = counts(t.links()[l]);
  }

  // Adds (sign +1) or removes (-1) the flow a->b of step s; returns the surrogate change.
  double flow(int s, int ea, int eb, double sign) {
    if (ea < 0 || eb < 0) return 0;
    double delta = 0;
    routes_.paths(ea, eb, paths_);
    double* load = load_.data() + size_t(s) * nlinks_;
    for (const auto& path : paths_)
      path.for_each_link([&](int l) {
        if (!counted_[l]) return;
        double before = load[l];
        double after = before + sign * path.fraction;
        load[l] = after;
        delta += weight_[s] * (pow4(after) - pow4(before)) + 1e-3 * sign;  // hops tie-break
      });
    return delta;
  }

  // Adds or removes every flow touching virtual v (flows to u are skipped: the caller
  // handles them once).
  double flows_of(int v, int skip, double sign) {
    double d = 0;
    for (const auto& a : adj_[v]) {
      if (a.peer == skip) continue;
      int ev = ep_[v], ep = ep_[a.peer];
      d += a.out ? flow(a.step, ev, ep, sign) : flow(a.step, ep, ev, sign);
    }
    return d;
  }
  double flows_between(int v, int u, double sign) {
    double d = 0;
    for (const auto& a : adj_[v])
      if (a.peer == u) d += a.out ? flow(a.step, ep_[v], ep_[u], sign) : flow(a.step, ep_[u], ep_[v], sign);
    return d;
  }

  std::vector<int> greedy() {
    // Candidate endpoints for the next virtual rank: the first free one behind each switch
    // (or package), plus the free ones on the hosts of already placed partners.
    const auto& eps = t_.endpoints();
    std::map<int, std::vector<int>> by_site;
    for (int r = 0; r < n_; ++r) {
      int e = p_.endpoint_of_rank[r];
      int site = eps[e].attach_switch >= 0 ? eps[e].attach_switch
                 : eps[e].package >= 0     ? 100000 + eps[e].package
                                           : 200000 + eps[e].host_index;
      by_site[site].push_back(r);
    }
    std::vector<std::vector<int>> sites;
    for (auto& [k, v] : by_site) sites.push_back(v);
    std::vector<size_t> next(sites.size(), 0);
    std::vector<char> used(n_, 0);
    std::map<int, std::vector<int>> ranks_on_host;
    for (int r = 0; r < n_; ++r) ranks_on_host[eps[p_.endpoint_of_rank[r]].host_index].push_back(r);

    ep_.assign(n_, -1);
    std::vector<int> order(n_, -1);
    std::vector<int> candidates;
    for (int v = 0; v < n_; ++v) {
      candidates.clear();
      for (int i = 0; i < int(sites.size()); ++i) {
        while (next[i] < sites[i].size() && used[sites[i][next[i]]]) ++next[i];
        if (next[i] < sites[i].size()) candidates.push_back(sites[i][next[i]]);
      }
      for (const auto& a : adj_[v]) {
        if (order[a.peer] < 0) continue;
        int h = eps[p_.endpoint_of_rank[order[a.peer]]].host_index;
        for (int r : ranks_on_host[h])
          if (!used[r]) candidates.push_back(r);
      }
      int best = -1;
      double best_delta = 0;
      for (int r : candidates) {
        ep_[v] = p_.endpoint_of_rank[r];
        double d = flows_of(v, -1, +1);
        flows_of(v, -1, -1);
        if (best < 0 || d < best_delta - 1e-12) {
          best = r;
          best_delta = d;
        }
      }
      order[v] = best;
      used[best] = 1;
      ep_[v] = p_.endpoint_of_rank[best];
      flows_of(v, -1, +1);
    }
    return order;
  }

  void load(const std::vector<int>& order) {
    std::fill(load_.begin(), load_.end(), 0.0);
    ep_.resize(n_);
    for (int v = 0; v < n_; ++v) ep_[v] = p_.endpoint_of_rank[order[v]];
    for (int s = 0; s < int(pattern_.size()); ++s)
      for (auto [a, b] : pattern_[s].pairs) flow(s, ep_[a], ep_[b], +1);
  }

  double worst() const {
    double w = 0;
    for (double x : load_) w = std::max(w, x);
    return w;
  }

  // Random pairwise swaps, kept when the surrogate does not get worse.
  void improve(std::vector<int>& order, int64_t max_swaps, double target) {
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<int> pick(0, n_ - 1);
    int64_t check_every = std::max<int64_t>(n_, 64);
    for (int64_t it = 0; it < max_swaps; ++it) {
      int v = pick(rng), u = pick(rng);
      if (v == u || ep_[v] == ep_[u]) continue;
      double d = 0;
      d += flows_of(v, u, -1) + flows_of(u, v, -1) + flows_between(v, u, -1);
      std::swap(ep_[v], ep_[u]);
      d += flows_of(v, u, +1) + flows_of(u, v, +1) + flows_between(v, u, +1);
      if (d > 1e-9) {  // worse: undo
        flows_of(v, u, -1);
        flows_of(u, v, -1);
        flows_between(v, u, -1);
        std::swap(ep_[v], ep_[u]);
        flows_of(v, u, +1);
        flows_of(u, v, +1);
        flows_between(v, u, +1);
      } else {
        std::swap(order[v], order[u]);
      }
      if ((it + 1) % check_every == 0 && worst() <= target + 1e-9) break;
    }
  }

  // Host-structured swaps for orders whose virtual ranks [h*G, h*G+G) all sit on one host
  // (G = 2^lg): either two GPUs of one host trade local indices, or two whole hosts trade
  // their blocks. Both keep every pair of the first lg steps inside a host, so only the
  // host-level steps are searched; kept when the surrogate does not get worse.
  // `max_swaps` counts pair swaps: a host exchange costs G of them.
  void improve_host_blocks(std::vector<int>& order, int64_t max_swaps, int lg, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<int> pick(0, n_ - 1);
    const int g = 1 << lg;
    for (int64_t done = 0; done < max_swaps;) {
      int v = pick(rng), u = pick(rng);
      int hv = v >> lg, hu = u >> lg;
      ++done;
      if (v == u) continue;
      done += hv == hu ? 0 : g - 1;
      if (hv == hu) {
        if (swap(v, u) > 1e-9) swap(v, u);
        else std::swap(order[v], order[u]);
        continue;
      }
      double d = 0;
      for (int i = 0; i < g; ++i) d += swap((hv << lg) | i, (hu << lg) | i);
      if (d > 1e-9) {
        for (int i = g - 1; i >= 0; --i) swap((hv << lg) | i, (hu << lg) | i);
      } else {
        for (int i = 0; i < g; ++i) std::swap(order[(hv << lg) | i], order[(hu << lg) | i]);
      }
    }
  }

 private:
  // Swaps the endpoints of virtual ranks v and u with their flows; returns the surrogate
  // change. Swapping again undoes it.
  double swap(int v, int u) {
    double d = flows_of(v, u, -1) + flows_of(u, v, -1) + flows_between(v, u, -1);
    std::swap(ep_[v], ep_[u]);
    d += flows_of(v, u, +1) + flows_of(u, v, +1) + flows_between(v, u, +1);
    return d;
  }

  static double pow4(double x) {
    double x2 = x * x;
    return x2 * x2;
  }

  const Topology& t_;
  const Placement& p_;
  const Pattern& pattern_;
  RouteCache routes_;
  std::vector<PathView> paths_;
  int n_, nlinks_;
  std::vector<double> weight_;
  std::vector<std::vector<Adjacent>> adj_;
  std::vector<double> load_;
  std::vector<char> counted_;
  std::vector<int> ep_;
};

bool better(const RankOrder& a, const RankOrder& b) {
  if (a.max_load < b.max_load - 1e-9) return true;
  if (a.max_load > b.max_load + 1e-9) return false;
  return a.total_hops < b.total_hops;
}

}  // namespace

// Seeds: the identity, the greedy construction and any order the caller knows (the closed
// form where the switch shape fits but hosts hold several ranks). The swaps start from the
// best seed.
static RankOrder search_from(const Topology& t, const Placement& p, const Pattern& pattern,
                             int64_t max_swaps, std::vector<std::vector<int>> seeds) {
  int n = p.nranks();
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  RankOrder best = evaluate_order(t, p, pattern, identity);
  for (auto& seed : seeds) {
    RankOrder r = evaluate_order(t, p, pattern, std::move(seed));
    if (better(r, best)) best = std::move(r);
  }
  // Large searches would cost more than they save at plan time; the greedy alone is O(n *
  // switches), the swaps O(max_swaps * steps).
  if (n < 3 || n > 8192) return best;
  OrderSearch search(t, p, pattern);
  {
    RankOrder g = evaluate_order(t, p, pattern, search.greedy());
    if (better(g, best)) best = std::move(g);
  }
  std::vector<int> order = best.rank_of_virtual;
  if (max_swaps <= 0) max_swaps = std::min<int64_t>(int64_t(n) * 64, 400000);
  search.load(order);
  // Keep improving below the bound too: at equal worst load, fewer network hops (host
  // pairs on the heavy steps) still lower the surrogate.
  search.improve(order, max_swaps, -1);
  RankOrder found = evaluate_order(t, p, pattern, order);
  if (better(found, best)) best = std::move(found);
  return best;
}

RankOrder search_order(const Topology& t, const Placement& p, const Pattern& pattern,
                       int64_t max_swaps) {
  return search_from(t, p, pattern, max_swaps, {});
}

// Multi-GPU hosts: virtual rank v = (host bits, local bits), so the first (largest) halving
// steps pair GPUs of one host over the free host fabric. The local index is flipped on
// hosts of odd popcount, so at every cross-host step the partner is the neighbouring GPU
// of the other host, whose NIC sits in the other group when NICs alternate (the EFLOPS
// parity rule, applied to hosts). Empty unless every host holds the same power-of-two
// number G > 1 of ranks and the host count is a power of two; `log2_g` gets log2(G).
static std::vector<int> host_major_order(const Topology& t, const Placement& p,
                                         int* log2_g = nullptr, bool parity_flip = true) {
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

// Host-aware HD order: the host-major order, then a search that only moves whole hosts or
// GPUs within a host, so steps 0..log2(G)-1 (bytes/2, bytes/4, ...: the largest halving
// steps) stay on the host fabric and the host-level steps, where each GPU index runs its
// own HD among the hosts, get spread over distinct inter-group links where the shape
// allows. Empty when the hosts are not uniform powers of two (see host_major_order).
std::optional<RankOrder> host_aware_hd_order(const Topology& t, const Placement& p, double bytes,
                                             RouteCache* routes, Collective collective) {
  // The search's size limit (search_from); fewer than two ranks have no order to choose.
  // Reduce-scatter and allgather alone: their schedules hold P^2 ops under a scrambling
  // order (sched/halving_doubling.h), too many to build twice for ranking above 1024.
  if (p.nranks() < 2 || p.nranks() > (collective == Collective::AllReduce ? 8192 : 1024))
    return std::nullopt;
  Pattern pattern = halving_doubling_pattern(p.nranks(), bytes);
  int lg = 0;
  if (host_major_order(t, p, &lg).empty()) return std::nullopt;
  int n = p.nranks();
  // Up to 1024 ranks: two seeds (with and without the parity flip) and two swap sequences
  // each, since the structured moves are few and one start often settles above the load a
  // second one finds; larger counts: one start. The starts together get the search's swap
  // budget (search_from; at least 4096 pair swaps each, which is instant), so plan time
  // stays of the order of the search's. Best by worst load, then hops.
  const int starts = n <= 1024 ? 4 : 1;
  const int64_t budget =
      std::max<int64_t>(std::min<int64_t>(int64_t(n) * 64, 400000) / starts, 4096);
  std::optional<RankOrder> best;
  for (int start = 0; start < starts; ++start) {
    std::vector<int> order = host_major_order(t, p, nullptr, /*parity_flip=*/start < 2);
    if (n > (1 << lg)) {
      OrderSearch search(t, p, pattern);
      search.load(order);
      search.improve_host_blocks(order, budget, lg, start % 2 ? 54321u : 12345u);
    }
    RankOrder r = evaluate_order(t, p, pattern, std::move(order), routes);
    if (!best || better(r, *best)) best = std::move(r);
    if (n == (1 << lg)) break;  // one host: nothing to search
  }
  if (collective != Collective::AllReduce) {
    // Reduce-scatter and allgather alone run distance q/2 first (halving_doubling.h), so the
    // heavy steps pair v with v ^ 2^(k-1), ...: bit-reversing the virtual rank moves the
    // host-local pairs there. Per-step pairings, hence the loads, are the same set.
    int k = std::countr_zero(unsigned(n));
    std::vector<int> reversed(n);
    for (int v = 0; v < n; ++v) {
      unsigned r = 0;
      for (int b = 0; b < k; ++b) r |= ((unsigned(v) >> b) & 1u) << (k - 1 - b);
      reversed[v] = best->rank_of_virtual[r];
    }
    best->rank_of_virtual = std::move(reversed);
  }
  return best;
}

// The cost model's time for the HD allreduce of `bytes` (4-byte elements) under an order:
// the ranking the planner applies between algorithms, applied between orders.
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

RankOrder hd_search_order(const Topology& t, const Placement& p, double bytes, RouteCache* routes) {
  std::vector<int> order;
  double bound = 0;
  bool fits = closed_form_order(t, p, order, bound);
  if (fits && alone_on_host(t, p)) {
    // The doubling steps repeat the halving steps' pairs, so the halving steps are measured
    // and their hops counted twice.
    Pattern halving = hd_pattern(p.nranks(), bytes, false);
    RankOrder r = evaluate_order(t, p, halving, std::move(order), routes);
    r.total_hops *= 2;
    r.closed_form = true;
    // Every HD pair of this order is cross-group and each switch sends E flows per step
    // over S inter-group links, so max(1, E/S) bounds every order of this shape that keeps
    // pairs cross-group; the measured load is reported beside it.
    r.lower_bound = std::max(r.lower_bound, bound);
    return r;
  }
  Pattern pattern = halving_doubling_pattern(p.nranks(), bytes);
  std::vector<std::vector<int>> seeds;
  if (fits) seeds.push_back(std::move(order));
  if (std::has_single_bit(unsigned(p.nranks()))) {
    std::vector<int> host_major = host_major_order(t, p);
    if (!host_major.empty()) seeds.push_back(std::move(host_major));
  }
  return search_from(t, p, pattern, 0, std::move(seeds));
}

// Ranks sorted by the switch behind them (BiGraph access switch, NAP package), then host
// and GPU: HD's low distances, which carry its largest steps, stay behind one switch. The
// EFLOPS closed form instead crosses groups at every distance, which is optimal when every
// switch has inter-group links to spare (full BiGraph, E <= S) but puts E flows on one
// link at every step of a partially filled cluster (8 ranks behind U0 and L0: load 4 on all
// six steps where this order has it on the two smallest).
std::vector<int> switch_major_order(const Topology& t, const Placement& p) {
  std::vector<int> order(size_t(p.nranks()));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int r) {
    const topo::Endpoint& e = t.endpoints()[size_t(p.endpoint_of_rank[size_t(r)])];
    return std::tuple(e.attach_switch >= 0 ? e.attach_switch : e.package, e.host_index, e.gpu, r);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

RankOrder hd_order(const Topology& t, const Placement& p, double bytes, RouteCache* routes,
                   Collective collective) {
  if (collective == Collective::AllToAll)
    throw std::invalid_argument("hd_order: there is no halving-doubling all-to-all");
  RankOrder found = hd_search_order(t, p, bytes, routes);
  // The search ranks by worst link load over all steps alike, so it keeps the network on
  // the heavy first steps whenever a switch- or host-local order has a higher worst load on
  // some later, lighter step. Those orders are kept when the cost model, which weighs each
  // step by its bytes, predicts them faster (ties: the search's).
  std::vector<RankOrder> others;
  if (std::optional<RankOrder> host_aware = host_aware_hd_order(t, p, bytes, routes, collective))
    others.push_back(std::move(*host_aware));
  if (p.nranks() >= 4 && p.nranks() <= 8192 && std::has_single_bit(unsigned(p.nranks()))) {
    std::vector<int> order = switch_major_order(t, p);
    if (collective != Collective::AllReduce) {
      // Reduce-scatter and allgather alone run distance q/2 first: bit-reversed virtual
      // ranks put their heavy steps behind one switch (as host_aware_hd_order does).
      const int k = std::countr_zero(unsigned(p.nranks()));
      std::vector<int> reversed(order.size());
      for (int v = 0; v < p.nranks(); ++v) {
        unsigned r = 0;
        for (int b = 0; b < k; ++b) r |= ((unsigned(v) >> b) & 1u) << (k - 1 - b);
        reversed[size_t(v)] = order[r];
      }
      order = std::move(reversed);
    }
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

// ---------------------------------------------------------------------------------------
// Rings

std::vector<int> rank_order_ring(int nranks) {
  std::vector<int> order(std::max(nranks, 0));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

static Pattern ring_pattern(int n) {
  Pattern pattern(1);
  for (int i = 0; i < n && n > 1; ++i) pattern[0].pairs.emplace_back(i, (i + 1) % n);
  return pattern;
}

std::vector<int> topology_aware_ring(const Topology& t, const Placement& p) {
  int n = p.nranks();
  std::vector<int> identity = rank_order_ring(n);
  if (n < 3) return identity;
  // Full regular BiGraph, E <= S: round r visits U_i slot r then L_{(i+r) mod S} slot r.
  // Upper->lower hops use links (i, i+r), lower->upper hops (i+r, i+1): over the E rounds
  // no directed link repeats (an Eulerian circuit of the directed K_{S,S} when E = S).
  GroupedRanks g;
  if (alone_on_host(t, p) && group_ranks(t, p, g)) {
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
  if (n > 8192 || base.max_load <= base.lower_bound + 1e-9) return identity;
  RankOrder found = search_order(t, p, pattern);
  return better(found, base) ? found.rank_of_virtual : identity;
}

std::vector<int> package_major_order(const Topology& t, const Placement& p) {
  std::vector<int> order = rank_order_ring(p.nranks());
  const auto& eps = t.endpoints();
  auto key = [&](int r) {
    const auto& e = eps[p.endpoint_of_rank[r]];
    if (t.kind() == topo::TopologyKind::Nap) return std::array<int, 3>{e.package, e.node, r};
    return std::array<int, 3>{e.host_index, e.gpu, r};
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

}  // namespace topocoll::sched
