#include "topo/topology_builder.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <vector>
#include <unordered_set>

#include "topo/topology_error.h"

namespace topocoll::topo {
namespace {

// NAP: nodes relay across the torus (Topology::route_nap), so every node forwards: every
// endpoint must reach endpoint 0 (links come in pairs, so reaching is symmetric).
void check_connected_through_any_node(const Topology& t) {
  std::vector<char> seen(size_t(t.graph_node_count()), 0);
  std::deque<int> frontier{0};
  seen[0] = 1;
  while (!frontier.empty()) {
    const int node = frontier.front();
    frontier.pop_front();
    for (int l : t.out_links(t.node_ref(node))) {
      const int next = t.graph_node(t.links()[l].to);
      if (!seen[size_t(next)]) {
        seen[size_t(next)] = 1;
        frontier.push_back(next);
      }
    }
  }
  for (int e = 0; e < int(t.endpoints().size()); ++e)
    if (!seen[size_t(e)])
      throw TopologyError("", "the network is disconnected: endpoint \"" + t.endpoints()[size_t(e)].id +
                                  "\" cannot reach endpoint \"" + t.endpoints()[0].id + "\"");
}

// BiGraph: connectivity as its routing sees it (Topology::route_bigraph, shortest_links):
// only switches forward, an endpoint never does, so two endpoints are connected when each
// is cabled to one component of the switches-only graph (a host's fabric is one such switch,
// shared by its endpoints). A walk through endpoints accepted upper and lower groups joined
// only through one host's two NICs, and planning then failed with "no route".
void check_connected_through_switches(const Topology& t) {
  const int E = int(t.endpoints().size()), N = t.graph_node_count();
  std::vector<int> parent(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i) parent[size_t(i)] = i;
  auto find = [&](int x) {
    while (parent[size_t(x)] != x) x = parent[size_t(x)] = parent[size_t(parent[size_t(x)])];
    return x;
  };
  for (const Link& l : t.links())
    if (l.from.type == NodeRef::Type::Switch && l.to.type == NodeRef::Type::Switch)
      parent[size_t(find(t.graph_node(l.from)))] = find(t.graph_node(l.to));
  // Each endpoint's components; endpoints with the same set stand for each other.
  std::map<std::vector<int>, int> first_with;  // components -> the first endpoint with them
  std::vector<int> everyone;                     // components every endpoint reaches
  for (int e = 0; e < E; ++e) {
    std::vector<int> mine;
    for (int l : t.out_links({NodeRef::Type::Endpoint, e}))
      if (t.links()[l].to.type == NodeRef::Type::Switch) mine.push_back(find(t.graph_node(t.links()[l].to)));
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    if (e == 0) everyone = mine;
    std::vector<int> common;
    std::set_intersection(everyone.begin(), everyone.end(), mine.begin(), mine.end(), std::back_inserter(common));
    everyone = std::move(common);
    first_with.try_emplace(std::move(mine), e);
  }
  if (E <= 1 || !everyone.empty()) return;  // one component all endpoints reach: connected
  constexpr size_t kMostAttachments = 4096;  // pairs of distinct sets checked one by one
  if (first_with.size() > kMostAttachments)
    throw TopologyError("", "cannot confirm the network is connected: no switch reaches every endpoint, and " +
                                std::to_string(first_with.size()) + " endpoints reach distinct switch groups (at most " +
                                std::to_string(kMostAttachments) + " are checked pair by pair)");
  const std::vector<std::pair<std::vector<int>, int>> sets(first_with.begin(), first_with.end());
  for (size_t a = 0; a < sets.size(); ++a)
    for (size_t b = a + 1; b < sets.size(); ++b) {
      const auto& x = sets[a].first;
      const auto& y = sets[b].first;
      bool shared = false;
      for (size_t i = 0, j = 0; i < x.size() && j < y.size() && !shared;)
        shared = x[i] == y[j] ? true : (x[i] < y[j] ? (++i, false) : (++j, false));
      if (!shared)
        throw TopologyError("", "the network is disconnected: endpoint \"" + t.endpoints()[size_t(sets[a].second)].id +
                                    "\" cannot reach endpoint \"" + t.endpoints()[size_t(sets[b].second)].id +
                                    "\" through switches (an endpoint never forwards, not even to its host's other NICs)");
    }
}

}  // namespace


TopologyBuilder::TopologyBuilder(TopologyKind kind, std::string name) {
  t_.kind_ = kind;
  t_.name_ = std::move(name);
}

int TopologyBuilder::add_host(const std::string& name, HostFabricKind fabric, double fabric_gbps,
                              double fabric_latency_us) {
  if (auto it = host_by_name_.find(name); it != host_by_name_.end()) return it->second;
  Host h;
  h.name = name;
  h.fabric = fabric;
  h.fabric_gbps = fabric_gbps;
  h.fabric_latency_us = fabric_latency_us;
  t_.hosts_.push_back(std::move(h));
  int index = int(t_.hosts_.size()) - 1;
  host_by_name_.emplace(name, index);
  return index;
}

std::optional<int> TopologyBuilder::find_host(const std::string& name) const {
  auto it = host_by_name_.find(name);
  if (it == host_by_name_.end()) return std::nullopt;
  return it->second;
}

int TopologyBuilder::add_endpoint(Endpoint endpoint) {
  int host = add_host(endpoint.host, HostFabricKind::NVSwitch, 2400, 0.5);
  endpoint.host_index = host;
  t_.endpoints_.push_back(std::move(endpoint));
  int index = int(t_.endpoints_.size()) - 1;
  t_.hosts_[host].endpoints.push_back(index);
  return index;
}

int TopologyBuilder::add_switch(Switch sw) {
  t_.switches_.push_back(std::move(sw));
  return int(t_.switches_.size()) - 1;
}

int TopologyBuilder::add_cable(NodeRef a, NodeRef b, LinkKind kind, double gbps,
                               double latency_us) {
  int id = int(t_.links_.size());
  Link ab{id, a, b, kind, gbps, latency_us, id + 1};
  Link ba{id + 1, b, a, kind, gbps, latency_us, id};
  t_.links_.push_back(ab);
  t_.links_.push_back(ba);
  return id;
}

int TopologyBuilder::attach(int endpoint, int sw, double gbps, double latency_us) {
  t_.endpoints_[endpoint].attach_switch = sw;
  return add_cable(endpoint_node(endpoint), switch_node(sw), LinkKind::Access, gbps, latency_us);
}

void TopologyBuilder::set_nap_shape(int nodes_per_package, int local_switches,
                                    std::vector<int> torus) {
  t_.nodes_per_package_ = nodes_per_package;
  t_.local_switches_ = local_switches;
  t_.torus_ = std::move(torus);
}

Topology TopologyBuilder::finalize() && {
  Topology& t = t_;
  if (t.endpoints_.empty()) throw TopologyError("", "the topology has no endpoints");
  std::unordered_set<std::string> ids;
  {
    for (const auto& e : t.endpoints_)
      if (!ids.insert(e.id).second)
        throw TopologyError("", "duplicate endpoint id \"" + e.id + "\"");
    for (const auto& s : t.switches_)
      if (!ids.insert(s.id).second)
        throw TopologyError("", "duplicate node id \"" + s.id + "\"");
  }

  // Host fabric: one pseudo-switch per host with more than one endpoint, so a GPU's
  // injection into NVSwitch/NVLink/PCIe is one link whose load can be counted. The
  // end-to-end fabric latency is split evenly over the two links of a GPU-to-GPU route.
  int fabric_count = 0;
  for (int h = 0; h < int(t.hosts_.size()); ++h) {
    Host& host = t.hosts_[h];
    host.fabric_switch = -1;
    if (host.endpoints.size() < 2) continue;
    Switch fabric;
    fabric.id = host.name + ".fabric";
    fabric.role = SwitchRole::HostFabric;
    fabric.index_in_role = fabric_count++;
    fabric.host_index = h;
    fabric.ports = 0;
    fabric.latency_us = 0;
    if (!ids.insert(fabric.id).second)
      throw TopologyError("", "id \"" + fabric.id + "\" clashes with the fabric of host \"" +
                                  host.name + "\"");
    host.fabric_switch = add_switch(std::move(fabric));
    for (int e : host.endpoints)
      add_cable(endpoint_node(e), switch_node(host.fabric_switch), LinkKind::HostFabric,
                host.fabric_gbps, host.fabric_latency_us / 2);
  }

  t.out_links_.assign(t.graph_node_count(), {});
  for (const auto& l : t.links_) t.out_links_[t.graph_node(l.from)].push_back(l.id);

  if (t.kind_ == TopologyKind::BiGraph) {
    t.upper_switches_.clear();
    t.lower_switches_.clear();
    for (int s = 0; s < int(t.switches_.size()); ++s) {
      if (t.switches_[s].role == SwitchRole::Upper) t.upper_switches_.push_back(s);
      if (t.switches_[s].role == SwitchRole::Lower) t.lower_switches_.push_back(s);
    }
    auto by_index = [&](int a, int b) {
      return t.switches_[a].index_in_role < t.switches_[b].index_in_role;
    };
    std::stable_sort(t.upper_switches_.begin(), t.upper_switches_.end(), by_index);
    std::stable_sort(t.lower_switches_.begin(), t.lower_switches_.end(), by_index);
    t.switches_per_group_ = int(t.upper_switches_.size());
    for (const auto& e : t.endpoints_)
      if (e.attach_switch < 0) throw TopologyError("", "endpoint \"" + e.id + "\" is not cabled");
  } else {
    int packages = t.package_count();
    int n = t.nodes_per_package_, k = t.local_switches_;
    t.package_switches_.assign(size_t(packages) * k, -1);
    t.package_nodes_.assign(size_t(packages) * n, -1);
    for (int s = 0; s < int(t.switches_.size()); ++s) {
      const Switch& sw = t.switches_[s];
      if (sw.role != SwitchRole::Local) continue;
      if (sw.package < 0 || sw.package >= packages || sw.index_in_role < 0 ||
          sw.index_in_role >= k)
        throw TopologyError("", "local switch \"" + sw.id + "\" is outside the package shape");
      t.package_switches_[size_t(sw.package) * k + sw.index_in_role] = s;
    }
    for (int e = 0; e < int(t.endpoints_.size()); ++e) {
      const Endpoint& ep = t.endpoints_[e];
      if (ep.package < 0 || ep.package >= packages || ep.node < 0 || ep.node >= n)
        throw TopologyError("", "node \"" + ep.id + "\" is outside the package shape");
      int& slot = t.package_nodes_[size_t(ep.package) * n + ep.node];
      if (slot >= 0) throw TopologyError("", "node \"" + ep.id + "\" is defined twice");
      slot = e;
    }
    for (int p = 0; p < packages; ++p) {
      for (int j = 0; j < k; ++j)
        if (t.package_switches_[size_t(p) * k + j] < 0)
          throw TopologyError("", "package " + std::to_string(p) + " lacks local switch " +
                                      std::to_string(j));
      for (int i = 0; i < n; ++i)
        if (t.package_nodes_[size_t(p) * n + i] < 0)
          throw TopologyError("", "package " + std::to_string(p) + " lacks node " +
                                      std::to_string(i));
    }
  }

  if (t.kind() == TopologyKind::BiGraph) check_connected_through_switches(t);
  else check_connected_through_any_node(t);
  return std::move(t_);
}

}  // namespace topocoll::topo
