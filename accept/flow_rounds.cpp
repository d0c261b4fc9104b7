#include "accept/flow_rounds.h"

#include <algorithm>
#include <set>

namespace topocoll::accept {

using topo::LinkKind;

std::vector<int> flow_links(const topo::Topology& t, int src, int dst, int lane) {
  topo::RouteHint hint;
  hint.local_switch = lane;
  const auto paths = t.route(src, dst, hint);
  std::vector<int> links;
  if (paths.empty()) return links;
  for (int l : paths.front().links)
    if (t.links()[l].kind != LinkKind::HostFabric) links.push_back(l);
  return links;
}

RoundPlan plan_flow_rounds(const topo::Topology& t, const std::vector<int>& present, int coverage,
                           int max_rounds, int max_flows) {
  RoundPlan plan;
  plan.crossings.assign(t.links().size(), 0);
  // Candidates: every ordered pair on different hosts, per local switch where flows stripe.
  const bool stripes = t.kind() == topo::TopologyKind::Nap && t.local_switches() > 1;
  std::vector<ProbeFlow> candidates;
  for (int a : present)
    for (int b : present) {
      if (t.endpoints()[a].host_index == t.endpoints()[b].host_index) continue;
      const int lanes = stripes ? t.local_switches() : 1;
      std::set<std::vector<int>> seen;
      for (int j = 0; j < lanes; ++j) {
        ProbeFlow f{a, b, stripes ? j : -1, flow_links(t, a, b, stripes ? j : -1)};
        // A pinned flow that stays off the local switches (same node index: straight onto
        // the torus) is the same flow for every lane.
        if (!f.links.empty() && seen.insert(f.links).second) candidates.push_back(std::move(f));
      }
    }
  // A flow tests a link at its full rate only where that link is (one of) the flow's
  // slowest: a flow held to 10 Gb/s by a torus cable shows a 20 Gb/s port only half-used.
  // Coverage counts the flows that test a link fully; links no flow tests fully count all.
  std::vector<double> rate_of(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    double r = 1e300;
    for (int l : candidates[i].links) r = std::min(r, t.links()[l].gbps);
    rate_of[i] = r;
  }
  std::vector<int> distinct(t.links().size(), 0), full(t.links().size(), 0);
  for (size_t i = 0; i < candidates.size(); ++i)
    for (int l : candidates[i].links) {
      ++distinct[l];
      if (rate_of[i] >= t.links()[l].gbps * (1 - 1e-9)) ++full[l];
    }
  auto tests = [&](size_t i, int l) {
    return full[l] == 0 || rate_of[i] >= t.links()[l].gbps * (1 - 1e-9);
  };
  std::vector<int> need(t.links().size(), 0);
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::HostFabric) continue;
    if (distinct[l.id] == 0) plan.unreachable.push_back(l.id);
    else need[l.id] = std::min(coverage, full[l.id] > 0 ? full[l.id] : distinct[l.id]);
  }
  // Per link: the other links every flow across it so far also crossed. A slow link can
  // only be told from those, so flows that shrink this set count as much as new coverage.
  std::vector<std::vector<int>> shared(t.links().size());
  std::vector<char> covered(t.links().size(), 0);
  auto separates = [&](const ProbeFlow& f, int l) {
    if (!covered[l] || shared[l].empty()) return false;
    return std::any_of(shared[l].begin(), shared[l].end(), [&](int o) {
      return std::find(f.links.begin(), f.links.end(), o) == f.links.end();
    });
  };
  std::vector<char> used_flow(candidates.size(), 0);
  std::set<std::pair<int, int>> pairs_used;
  auto outstanding = [&] {
    for (size_t l = 0; l < need.size(); ++l)
      if (need[l] > 0 || (covered[l] && !shared[l].empty() && (full[l] > 1 || (full[l] == 0 && distinct[l] > 1))))
        return true;
    return false;
  };
  while (outstanding() && int(plan.rounds.size()) < max_rounds) {
    FlowRound round;
    std::vector<char> busy(t.links().size(), 0);
    while (max_flows <= 0 || int(round.flows.size()) < max_flows) {
      // The flow covering the most still-needed links; a pair not measured yet breaks ties,
      // so each link is crossed by flows that differ elsewhere.
      int best = -1;
      double best_score = 0;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (used_flow[i]) continue;
        const auto& f = candidates[i];
        if (std::any_of(f.links.begin(), f.links.end(), [&](int l) { return busy[l]; })) continue;
        double score = 0;
        for (int l : f.links) score += tests(i, l) && (need[l] > 0 || separates(f, l)) ? 1.0 : 0.0;
        if (score == 0) continue;
        if (!pairs_used.count({f.src, f.dst})) score += 0.5;
        score -= 0.01 * double(f.links.size());  // shorter paths localise better
        if (score > best_score + 1e-12) best_score = score, best = int(i);
      }
      if (best < 0) break;
      used_flow[best] = 1;
      const ProbeFlow& f = candidates[best];
      pairs_used.insert({f.src, f.dst});
      for (int l : f.links) {
        busy[l] = 1;
        ++plan.crossings[l];
        if (!tests(size_t(best), l)) continue;
        --need[l];
        std::vector<int> others;
        for (int o : f.links)
          if (o != l && (!covered[l] || std::find(shared[l].begin(), shared[l].end(), o) != shared[l].end()))
            others.push_back(o);
        shared[l] = std::move(others);
        covered[l] = 1;
      }
      round.flows.push_back(f);
    }
    if (round.flows.empty()) break;
    plan.rounds.push_back(std::move(round));
  }
  return plan;
}

}  // namespace topocoll::accept
