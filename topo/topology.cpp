#include "topo/topology.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <stdexcept>

#include "topo/topology_error.h"

namespace topocoll::topo {

std::string_view to_string(TopologyKind k) {
  switch (k) {
    case TopologyKind::BiGraph: return "bigraph";
    case TopologyKind::Nap: return "nap";
  }
  return "?";
}

std::string_view to_string(SwitchRole r) {
  switch (r) {
    case SwitchRole::Upper: return "upper";
    case SwitchRole::Lower: return "lower";
    case SwitchRole::Local: return "local";
    case SwitchRole::HostFabric: return "host-fabric";
  }
  return "?";
}

std::string_view to_string(LinkKind k) {
  switch (k) {
    case LinkKind::Access: return "access";
    case LinkKind::InterGroup: return "inter-group";
    case LinkKind::IntraPackage: return "intra-package";
    case LinkKind::InterPackage: return "inter-package";
    case LinkKind::HostFabric: return "host-fabric";
  }
  return "?";
}

std::string_view to_string(HostFabricKind k) {
  switch (k) {
    case HostFabricKind::NVSwitch: return "nvswitch";
    case HostFabricKind::NVLink: return "nvlink";
    case HostFabricKind::PCIe: return "pcie";
  }
  return "?";
}

int Topology::package_count() const {
  if (kind_ != TopologyKind::Nap || torus_.empty()) return 0;
  int count = 1;
  for (int d : torus_) count *= d;
  return count;
}

// Host names as DNS and hostfiles compare them: ignoring case (a file may say node1 of the
// machine whose hostname is Node1; the loader refuses two hosts that differ only in case).
std::optional<int> Topology::find_host(std::string_view name) const {
  const auto same = [](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  for (int h = 0; h < int(hosts_.size()); ++h)
    if (same(hosts_[h].name, name)) return h;
  const auto short_name = [](std::string_view n) { return n.substr(0, n.find('.')); };
  std::optional<int> found;
  for (int h = 0; h < int(hosts_.size()); ++h) {
    if (!same(short_name(hosts_[h].name), short_name(name))) continue;
    if (found) return std::nullopt;  // ambiguous: node7.a and node7.b
    found = h;
  }
  return found;
}

std::optional<int> Topology::find_endpoint(std::string_view host, int gpu) const {
  const std::optional<int> h = find_host(host);
  if (!h) return std::nullopt;
  for (int e : hosts_[*h].endpoints)
    if (endpoints_[e].gpu == gpu) return e;
  return std::nullopt;
}

std::optional<int> Topology::find_endpoint_by_id(std::string_view id) const {
  for (int e = 0; e < int(endpoints_.size()); ++e)
    if (endpoints_[e].id == id) return e;
  return std::nullopt;
}

std::optional<int> Topology::find_switch(std::string_view id) const {
  for (int s = 0; s < int(switches_.size()); ++s)
    if (switches_[s].id == id) return s;
  return std::nullopt;
}

std::string Topology::node_id(NodeRef n) const {
  if (n.type == NodeRef::Type::Endpoint) {
    if (n.index >= 0 && n.index < int(endpoints_.size())) return endpoints_[n.index].id;
  } else if (n.index >= 0 && n.index < int(switches_.size())) {
    return switches_[n.index].id;
  }
  return "?";
}

int Topology::graph_node(NodeRef n) const {
  return n.type == NodeRef::Type::Endpoint ? n.index : int(endpoints_.size()) + n.index;
}

NodeRef Topology::node_ref(int graph_node) const {
  int e = int(endpoints_.size());
  if (graph_node < e) return {NodeRef::Type::Endpoint, graph_node};
  return {NodeRef::Type::Switch, graph_node - e};
}

std::span<const int> Topology::out_links(NodeRef n) const {
  int g = graph_node(n);
  if (g < 0 || g >= int(out_links_.size())) return {};
  return out_links_[g];
}

std::optional<int> Topology::find_link(NodeRef from, NodeRef to) const {
  for (int l : out_links(from))
    if (links_[l].to == to) return l;
  return std::nullopt;
}

double Topology::latency_us(const Path& path) const {
  double total = 0;
  for (size_t i = 0; i < path.links.size(); ++i) {
    const Link& l = links_[path.links[i]];
    total += l.latency_us;
    if (i + 1 < path.links.size() && l.to.type == NodeRef::Type::Switch)
      total += switches_[l.to.index].latency_us;
  }
  return total;
}

const std::vector<int>& Topology::group_switches(SwitchRole group) const {
  static const std::vector<int> none;
  if (group == SwitchRole::Upper) return upper_switches_;
  if (group == SwitchRole::Lower) return lower_switches_;
  return none;
}

int Topology::local_switch(int package, int j) const {
  return package_switches_.at(size_t(package) * local_switches_ + j);
}

int Topology::package_node(int package, int node) const {
  return package_nodes_.at(size_t(package) * nodes_per_package_ + node);
}

std::vector<int> Topology::torus_coord(int package) const {
  std::vector<int> coord(torus_.size());
  for (int d = int(torus_.size()) - 1; d >= 0; --d) {
    coord[d] = package % torus_[d];
    package /= torus_[d];
  }
  return coord;
}

int Topology::package_at(const std::vector<int>& coord) const {
  int package = 0;
  for (size_t d = 0; d < torus_.size(); ++d) package = package * torus_[d] + coord[d];
  return package;
}

// Breadth-first search in link-id order: the deterministic fallback when the regular
// BiGraph route is missing a cable (explicit "links" lists may leave some out).
std::vector<int> Topology::shortest_links(NodeRef from, NodeRef to) const {
  std::vector<int> via(graph_node_count(), -1);
  std::vector<char> seen(graph_node_count(), 0);
  int src = graph_node(from), dst = graph_node(to);
  std::deque<int> frontier{src};
  seen[src] = 1;
  while (!frontier.empty() && !seen[dst]) {
    int node = frontier.front();
    frontier.pop_front();
    for (int l : out_links_[node]) {
      NodeRef next_ref = links_[l].to;
      int next = graph_node(next_ref);
      if (seen[next]) continue;
      // Only switches forward: a route never passes through another endpoint.
      if (next != dst && next_ref.type == NodeRef::Type::Endpoint) continue;
      seen[next] = 1;
      via[next] = l;
      frontier.push_back(next);
    }
  }
  if (!seen[dst]) throw TopologyError("", "no route from " + node_id(from) + " to " + node_id(to));
  std::vector<int> path;
  for (int node = dst; node != src; node = graph_node(links_[via[node]].from))
    path.push_back(via[node]);
  std::reverse(path.begin(), path.end());
  return path;
}

void Topology::scale_rates(double factor) {
  if (!(factor > 0) || !std::isfinite(factor))
    throw std::invalid_argument("rate scale " + std::to_string(factor) + " is not positive");
  for (auto& l : links_) l.gbps *= factor;
  for (auto& h : hosts_) h.fabric_gbps *= factor;
}

void Topology::set_link_gbps(int link, double gbps) {
  if (link < 0 || link >= int(links_.size()))
    throw std::out_of_range("set_link_gbps: link " + std::to_string(link) + " out of range");
  if (!(gbps > 0) || !std::isfinite(gbps))
    throw std::invalid_argument("rate " + std::to_string(gbps) + " Gb/s is not positive");
  links_[link].gbps = gbps;
}

std::vector<Path> Topology::route(int from, int to, RouteHint hint) const {
  int count = int(endpoints_.size());
  if (from < 0 || from >= count || to < 0 || to >= count)
    throw std::out_of_range("route: endpoint index out of range");
  if (from == to) return {};
  const Endpoint& a = endpoints_[from];
  const Endpoint& b = endpoints_[to];
  if (a.host_index == b.host_index) {
    int fabric = hosts_[a.host_index].fabric_switch;
    const NodeRef fn{NodeRef::Type::Switch, fabric};
    return {Path{{*find_link({NodeRef::Type::Endpoint, from}, fn),
                  *find_link(fn, {NodeRef::Type::Endpoint, to})},
                 1.0}};
  }
  if (kind_ == TopologyKind::BiGraph) return route_bigraph(from, to);
  return route_nap(from, to, hint);
}

std::vector<Path> Topology::route_bigraph(int from, int to) const {
  const NodeRef a{NodeRef::Type::Endpoint, from}, b{NodeRef::Type::Endpoint, to};
  const int s = endpoints_[from].attach_switch, t = endpoints_[to].attach_switch;
  const NodeRef sn{NodeRef::Type::Switch, s}, tn{NodeRef::Type::Switch, t};
  Path path;
  path.links.push_back(*find_link(a, sn));
  if (s != t) {
    const Switch& ss = switches_[s];
    const Switch& ts = switches_[t];
    std::vector<int> middle_links;
    if (ss.role != ts.role) {
      // Different groups: the one inter-group cable between the two switches.
      if (auto l = find_link(sn, tn)) middle_links = {*l};
    } else {
      // Same group: through a middle switch m of the other group,
      // m = (index(s) + index(t)) mod |other group|. For a fixed s this maps the other
      // switches of its group to distinct middles, so a switch's same-group traffic spreads
      // over its uplinks like ECMP, yet every route is reproducible and a->b, b->a agree.
      const auto& other = ss.role == SwitchRole::Upper ? lower_switches_ : upper_switches_;
      const int n = int(other.size());
      for (int i = 0; i < n && middle_links.empty(); ++i) {
        int m = other[(ss.index_in_role + ts.index_in_role + i) % n];
        NodeRef mn{NodeRef::Type::Switch, m};
        auto up = find_link(sn, mn);
        auto down = find_link(mn, tn);
        if (up && down) middle_links = {*up, *down};
      }
    }
    if (middle_links.empty()) middle_links = shortest_links(sn, tn);
    path.links.insert(path.links.end(), middle_links.begin(), middle_links.end());
  }
  path.links.push_back(*find_link(tn, b));
  return {path};
}

std::vector<Path> Topology::route_nap(int from, int to, RouteHint hint) const {
  const Endpoint& a = endpoints_[from];
  const Endpoint& b = endpoints_[to];
  const int k = local_switches_;
  if (hint.local_switch >= k)
    throw TopologyError("", "route hint: local switch " + std::to_string(hint.local_switch) +
                                " does not exist (the package has " + std::to_string(k) + ")");
  // Stage 1, inside the source package, to the node with the destination's node index.
  std::vector<Path> paths;
  const int relay = package_node(a.package, b.node);
  if (relay == from) {
    paths.push_back(Path{{}, 1.0});
  } else if (endpoints_[relay].host_index == a.host_index) {
    paths = route(from, relay);
  } else {
    // NAP: a node has one port to each of the k local switches, so a flow stripes over all
    // of them (1/k each) unless the schedule pins it to switch j.
    const NodeRef an{NodeRef::Type::Endpoint, from}, rn{NodeRef::Type::Endpoint, relay};
    for (int j = 0; j < k; ++j) {
      if (hint.local_switch >= 0 && j != hint.local_switch) continue;
      NodeRef sw{NodeRef::Type::Switch, local_switch(a.package, j)};
      paths.push_back(Path{{*find_link(an, sw), *find_link(sw, rn)}, 0});
    }
    for (auto& p : paths) p.fraction = 1.0 / double(paths.size());
  }
  // Stage 2: dimension-order routing on the torus, dimension 0 first, each dimension the
  // shorter way round its ring (ties go the positive way).
  std::vector<int> torus_links;
  std::vector<int> coord = torus_coord(a.package);
  const std::vector<int> target = torus_coord(b.package);
  int current = relay;
  for (size_t d = 0; d < torus_.size(); ++d) {
    const int size = torus_[d];
    const int forward = ((target[d] - coord[d]) % size + size) % size;
    const int step = forward <= size - forward ? 1 : -1;
    while (coord[d] != target[d]) {
      coord[d] = (coord[d] + step + size) % size;
      int next = package_node(package_at(coord), b.node);
      torus_links.push_back(*find_link({NodeRef::Type::Endpoint, current},
                                       {NodeRef::Type::Endpoint, next}));
      current = next;
    }
  }
  for (auto& p : paths) p.links.insert(p.links.end(), torus_links.begin(), torus_links.end());
  return paths;
}

int Topology::diameter_hops() const {
  // Routes depend only on the attach switches (BiGraph) or on the package pair and whether
  // the node indices differ (NAP), so one representative pair per class suffices.
  auto hops = [&](int a, int b) {
    if (a == b || endpoints_[a].host_index == endpoints_[b].host_index) return 0;
    auto paths = route(a, b);
    return int(paths.front().links.size()) - 1;
  };
  // Two endpoints on different hosts drawn from lists xs and ys, if any.
  auto pair_hops = [&](const std::vector<int>& xs, const std::vector<int>& ys) {
    for (int x : xs)
      for (int y : ys)
        if (endpoints_[x].host_index != endpoints_[y].host_index) return hops(x, y);
    return 0;
  };
  int diameter = 0;
  if (kind_ == TopologyKind::BiGraph) {
    std::vector<std::vector<int>> on_switch(switches_.size());
    for (int e = 0; e < int(endpoints_.size()); ++e)
      on_switch[endpoints_[e].attach_switch].push_back(e);
    size_t inter_cables = 0;
    for (const auto& l : links_) inter_cables += l.kind == LinkKind::InterGroup;
    const bool complete =
        inter_cables / 2 == upper_switches_.size() * lower_switches_.size();
    // Complete bipartite wiring: the route between two switches is fixed by their groups, so
    // one representative pair per kind of switch pair is enough; otherwise try every pair.
    std::vector<int> used;
    for (size_t s = 0; s < switches_.size(); ++s)
      if (!on_switch[s].empty()) used.push_back(int(s));
    for (size_t i = 0; i < used.size(); ++i) {
      bool seen_same_group = false, seen_other_group = false;
      for (size_t j = i; j < used.size(); ++j) {
        const int s = used[i], t = used[j];
        if (complete && s != t) {
          bool same_group = switches_[s].role == switches_[t].role;
          if (same_group ? seen_same_group : seen_other_group) continue;
          int h = pair_hops(on_switch[s], on_switch[t]);
          if (h > 0) (same_group ? seen_same_group : seen_other_group) = true;
          diameter = std::max(diameter, h);
        } else {
          diameter = std::max(diameter, pair_hops(on_switch[s], on_switch[t]));
        }
      }
    }
  } else {
    // From package 0 to every package (the torus looks the same from every package): one
    // pair with equal node indices (torus only) and one with different indices (local stage
    // too), each on different hosts.
    const int packages = package_count(), n = nodes_per_package_;
    for (int p = 0; p < 1; ++p)
      for (int q = 0; q < packages; ++q) {
        bool same_done = false, other_done = false;
        for (int i = 0; i < n && !(same_done && other_done); ++i)
          for (int j = 0; j < n; ++j) {
            bool same = i == j;
            if (same ? same_done : other_done) continue;
            int a = package_node(p, i), b = package_node(q, j);
            if (a == b || endpoints_[a].host_index == endpoints_[b].host_index) continue;
            diameter = std::max(diameter, hops(a, b));
            (same ? same_done : other_done) = true;
          }
      }
  }
  return diameter;
}

}  // namespace topocoll::topo
