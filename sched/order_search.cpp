#include "sched/order_search.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "sched/link_load.h"

namespace topocoll::sched {

using topo::Topology;

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
    for (int l = 0; l < nlinks_; ++l) counted_[l] = contends(t.links()[l]);
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

}  // namespace

int64_t default_swap_budget(int nranks) { return std::min<int64_t>(int64_t(nranks) * 64, 400000); }

// Seeds: the identity, the greedy construction and any order the caller knows (the closed
// form where the switch shape fits but hosts hold several ranks). The swaps start from the
// best seed.
RankOrder search_order_from(const Topology& t, const Placement& p, const Pattern& pattern,
                            std::vector<std::vector<int>> seeds, int64_t max_swaps) {
  int n = p.nranks();
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  RankOrder best = evaluate_order(t, p, pattern, identity);
  for (auto& seed : seeds) {
    RankOrder r = evaluate_order(t, p, pattern, std::move(seed));
    if (better_order(r, best)) best = std::move(r);
  }
  // Large searches would cost more than they save at plan time; the greedy alone is O(n *
  // switches), the swaps O(max_swaps * steps).
  if (n < 3 || n > kMaxSearchRanks) return best;
  OrderSearch search(t, p, pattern);
  {
    RankOrder g = evaluate_order(t, p, pattern, search.greedy());
    if (better_order(g, best)) best = std::move(g);
  }
  std::vector<int> order = best.rank_of_virtual;
  if (max_swaps <= 0) max_swaps = default_swap_budget(n);
  search.load(order);
  // Keep improving below the bound too: at equal worst load, fewer network hops (host
  // pairs on the heavy steps) still lower the surrogate.
  search.improve(order, max_swaps, -1);
  RankOrder found = evaluate_order(t, p, pattern, order);
  if (better_order(found, best)) best = std::move(found);
  return best;
}

RankOrder search_order(const Topology& t, const Placement& p, const Pattern& pattern,
                       int64_t max_swaps) {
  return search_order_from(t, p, pattern, {}, max_swaps);
}

void search_host_blocks(const Topology& t, const Placement& p, const Pattern& pattern,
                        std::vector<int>& order, int64_t max_swaps, int log2_gpus, uint64_t seed) {
  OrderSearch search(t, p, pattern);
  search.load(order);
  search.improve_host_blocks(order, max_swaps, log2_gpus, seed);
}

}  // namespace topocoll::sched
