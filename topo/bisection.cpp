#include "topo/bisection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace topocoll::topo {

namespace {

// BiGraph: once every switch is assigned a side, the cheapest balanced split keeps each
// endpoint with its switch except |imbalance| endpoints, each of which cuts its one access
// cable. Enumerating switch assignments is therefore exact; it is done up to 22 switches
// (4M assignments), beyond that the regular half-and-half split is reported as an upper
// bound (for the complete bipartite K(S,S) it cuts S*S/2 cables).
Bisection bigraph_bisection(const Topology& t) {
  const auto& upper = t.group_switches(SwitchRole::Upper);
  const auto& lower = t.group_switches(SwitchRole::Lower);
  std::vector<int> order(upper);
  order.insert(order.end(), lower.begin(), lower.end());
  const int n = int(order.size());
  std::vector<int> bit(t.switches().size(), -1);
  for (int i = 0; i < n; ++i) bit[order[i]] = i;
  std::vector<int> on_switch(n, 0);
  for (const auto& e : t.endpoints()) ++on_switch[bit[e.attach_switch]];
  double access = 0, inter = 0;
  std::vector<std::pair<int, int>> cables;
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::Access && access == 0) access = l.gbps;
    if (l.kind == LinkKind::InterGroup && l.id < l.reverse) {
      inter = l.gbps;
      cables.push_back({bit[l.from.index], bit[l.to.index]});
    }
  }
  const long total = long(t.endpoints().size());
  auto moves_for = [&](long in_a) {
    return std::min(std::labs(in_a - total / 2), std::labs(in_a - (total + 1) / 2));
  };
  Bisection best;
  best.gbps = std::numeric_limits<double>::infinity();
  if (n <= 22) {
    // Gray-code walk over the sides of switches 1..n-1 (switch 0 stays on side B: the two
    // sides are interchangeable); each step flips one switch and updates the cut from its
    // neighbours only.
    std::vector<std::vector<int>> neighbours(n);
    for (auto [a, b] : cables) {
      neighbours[a].push_back(b);
      neighbours[b].push_back(a);
    }
    std::vector<char> in_a(n, 0);
    long endpoints_a = 0;
    int crossing = 0;
    auto consider = [&] {
      long moves = moves_for(endpoints_a);
      double c = crossing * inter + double(moves) * access;
      if (c < best.gbps) {
        best.gbps = c;
        best.cables = crossing + int(moves);
      }
    };
    consider();
    for (uint64_t step = 1; step < (uint64_t(1) << (n - 1)); ++step) {
      const int v = 1 + __builtin_ctzll(step);
      for (int u : neighbours[v]) crossing += in_a[u] == in_a[v] ? 1 : -1;
      in_a[v] ^= 1;
      endpoints_a += in_a[v] ? on_switch[v] : -on_switch[v];
      consider();
    }
    best.exact = true;
    best.method = "exact: minimum over all splits of the switches, endpoints kept with their switch "
                  "except those moved to balance the halves (each cuts its access cable)";
  } else {
    const int s = int(upper.size());
    // Half of each group (with its endpoints) on side A, as a bit list.
    std::vector<int> in_a(n, 0);
    for (int i = 0; i < s / 2; ++i) in_a[i] = 1;
    for (int i = 0; i < int(lower.size()) / 2; ++i) in_a[s + i] = 1;
    long a_count = 0;
    for (int i = 0; i < n; ++i) a_count += in_a[i] * on_switch[i];
    int crossing = 0;
    for (auto [a, b] : cables) crossing += int(in_a[a] != in_a[b]);
    long moves = moves_for(a_count);
    best.gbps = crossing * inter + double(moves) * access;
    best.cables = crossing + int(moves);
    best.exact = false;
    best.method = "upper bound: half of each group on either side (too many switches to "
                  "enumerate every split)";
  }
  return best;
}

// NAP: candidates are (a) cutting the torus across one dimension of even size d -- every
// ring of that dimension loses 2 cables (1 when d = 2), and there are P/d rings per node
// index -- and (b) halving every package: each local switch stays with one half and loses
// its cables to the other, k * floor(N/2) per package. Not proven minimal in general.
Bisection nap_bisection(const Topology& t) {
  const int P = t.package_count(), N = t.nodes_per_package(), k = t.local_switches();
  double intra = 0, inter = 0;
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::IntraPackage && intra == 0) intra = l.gbps;
    if (l.kind == LinkKind::InterPackage && inter == 0) inter = l.gbps;
  }
  Bisection best;
  best.gbps = std::numeric_limits<double>::infinity();
  for (int d : t.torus_dims()) {
    if (d < 2 || d % 2 != 0) continue;
    int cables = (P / d) * N * (d == 2 ? 1 : 2);
    if (cables * inter < best.gbps) {
      best.gbps = cables * inter;
      best.cables = cables;
    }
  }
  if (N >= 2) {
    // Each package split N/2 : N/2; a local switch sits on one side and loses the links
    // to the other side's nodes. With an odd package count the halves stay balanced too.
    int per_package = k * (N / 2);
    int cables = per_package * P;
    if (cables * intra < best.gbps) {
      best.gbps = cables * intra;
      best.cables = cables;
    }
  }
  best.exact = false;
  best.method = "analytic: the cheaper of cutting the torus across one even dimension and "
                "halving every package";
  if (!std::isfinite(best.gbps)) {
    // No even dimension and one node per package (a torus of odd rings): cut across an odd
    // dimension, two cables per ring, the longest (the fewest rings); the halves then
    // differ by one slice of packages, the nearest to even a cut along packages gets.
    int longest = 0;
    for (int d : t.torus_dims()) longest = std::max(longest, d);
    best.gbps = 0;
    best.cables = 0;
    if (longest >= 3) {
      best.cables = 2 * (P / longest) * N;
      best.gbps = best.cables * inter;
      best.method = "analytic: cutting the torus across its longest dimension, odd (" +
                    std::to_string(longest) + "), so the halves differ by one slice of packages";
    } else {
      best.method = "one package of one node: nothing to cut";
    }
  }
  return best;
}

}  // namespace

Bisection bisection(const Topology& t) {
  return t.kind() == TopologyKind::BiGraph ? bigraph_bisection(t) : nap_bisection(t);
}

}  // namespace topocoll::topo
