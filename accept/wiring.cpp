#include "accept/wiring.h"

#include <algorithm>
#include <set>

#include "topo/cable_names.h"

namespace topocoll::accept {

WiringReport analyze_wiring(const topo::Topology& t, const std::vector<PathObservation>& obs,
                            const std::map<std::string, int>& known) {
  WiringReport report;
  // The node the file expects at TTL h (1-based): the far end of the h-th link; the last
  // hop is the destination itself.
  auto expected_node = [&](const ProbeFlow& f, size_t h) {
    return t.graph_node(t.links()[f.links[h - 1]].to);
  };
  std::map<std::string, std::map<int, int>> votes;
  for (const auto& o : obs) {
    ++report.probes;
    for (size_t h = 1; h <= o.flow.links.size() && h <= o.trace.responders.size(); ++h) {
      const std::string& a = o.trace.responders[h - 1];
      if (!a.empty()) ++votes[a][expected_node(o.flow, h)];
    }
    report.hops_expected += int(o.flow.links.size());
  }
  std::map<std::string, int> node_of;
  for (const auto& [address, count] : votes) {
    if (const auto k = known.find(address); k != known.end()) {
      node_of[address] = k->second;
      continue;
    }
    const auto best = std::max_element(count.begin(), count.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    node_of[address] = best->first;
  }
  for (const auto& [address, node] : node_of) report.node_of_address[address] = t.node_id(t.node_ref(node));

  // First deviation of every probe: (link left by, node reached) -> probes.
  std::map<std::pair<int, int>, int> deviations;
  for (const auto& o : obs)
    for (size_t h = 1; h <= o.flow.links.size() && h <= o.trace.responders.size(); ++h) {
      const std::string& a = o.trace.responders[h - 1];
      if (a.empty()) continue;
      ++report.hops_answered;
      const int want = expected_node(o.flow, h);
      const int got = node_of[a];
      if (got != want) {
        ++deviations[{o.flow.links[h - 1], got}];
        break;
      }
    }
  std::set<int> paired;
  auto name = [&](int graph_node) { return t.node_id(t.node_ref(graph_node)); };
  for (const auto& [key, count] : deviations) {
    const auto [link, reached] = key;
    if (paired.count(link)) continue;
    const auto& l = t.links()[link];
    const int from = t.graph_node(l.from), to = t.graph_node(l.to);
    WiringFinding f;
    f.probes = count;
    // A swap: the port for `reached` leads to `to`.
    const auto other = t.find_link(l.from, t.node_ref(reached));
    if (other && deviations.count({*other, to})) {
      paired.insert(*other);
      f.links = {std::min(link, *other), std::max(link, *other)};
      f.probes += deviations[{*other, to}];
      f.detail = topo::cable_name(t, link) + " and " + topo::cable_name(t, *other) + " look swapped: " +
                 name(from) + "'s port for " + name(to) + " reaches " + name(reached) + " and its port for " +
                 name(reached) + " reaches " + name(to);
    } else {
      f.links = {link};
      f.detail = name(from) + "'s port the file cables to " + name(to) + " (" + topo::cable_name(t, link) +
                 ") reaches " + name(reached);
    }
    report.findings.push_back(f);
  }
  return report;
}

}  // namespace topocoll::accept
