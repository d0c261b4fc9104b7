#include "fabric/fabric_plan.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <set>
#include <stdexcept>

#include "fabric/route_compiler.h"
#include "topo/cable_names.h"

namespace topocoll::fabric {
namespace {

using topo::LinkKind;
using topo::NodeRef;
using topo::Topology;

constexpr double kDefaultRateMbit = 20;
// The fastest cable emulated, as --rate-mbit's bound: tbf's limit and burst stay 32-bit.
constexpr double kMaxCableMbit = 10000;
// Route compilation walks Topology::route for every pair of endpoints.
constexpr int kMaxFabricEndpoints = 1024;
// Switches and cables are bounded apart from endpoints: a few lines of JSON (a thousand
// switches a group, no "links": complete bipartite) describe a million cables, which would
// take root hours and the machine's memory to build. The largest fabrics the project runs
// (1024 endpoints of BiGraph or NAP, docs/fabric.md) need a tenth of these.
constexpr int kMaxFabricNamespaces = 4096;
constexpr int kMaxFabricCables = 32768;

std::string dotted(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255);
}

// Data addresses: endpoints 10.1.0.1 up, routers 10.200.0.1 up; the management network
// 172.16.0.0/12 (its bridge .0.1, hosts from .0.2). All inside the fabric's own namespaces.
std::string endpoint_address(int e) { return dotted((10u << 24) + (1u << 16) + uint32_t(e) + 1); }
std::string router_address(int s) { return dotted((10u << 24) + (200u << 16) + uint32_t(s) + 1); }
std::string management_address(int host) {
  return dotted((172u << 24) + (16u << 16) + uint32_t(host) + 2);
}
constexpr const char* kManagementBridgeAddress = "172.16.0.1";
constexpr const char* kManagementPrefix = "/12";

std::string sanitized(const std::string& text) {
  std::string out;
  for (char c : text)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-') ? c : '_';
  return out;
}

// Interface names are unique per namespace and at most 15 characters (IFNAMSIZ - 1); `all`
// and `default` are the kernel's own entries in /proc/sys/net/ipv4/conf, never interfaces.
class InterfaceNamer {
 public:
  InterfaceNamer() { used_ = {"lo", "br0", "mgmt0", "all", "default"}; }
  std::string take(const std::string& preferred, const std::string& fallback_prefix) {
    const std::string name = sanitized(preferred);
    if (valid(name) && used_.insert(name).second) return name;
    for (int i = 0;; ++i) {
      std::string candidate = sanitized(fallback_prefix) + std::to_string(i);
      if (candidate.size() > 15) candidate = "if" + std::to_string(i);
      if (valid(candidate) && used_.insert(candidate).second) return candidate;
    }
  }

 private:
  static bool valid(const std::string& n) {
    return !n.empty() && n.size() <= 15 && n != "." && n != ".." && n.front() != '-';
  }
  std::set<std::string> used_;
};

// Labels of addresses on lo ("lo-<nic>"), unique per namespace and at most 15 characters.
// Not "lo:<nic>", the kernel's alias style: NCCL_SOCKET_IFNAME reads ':' as a port separator
// (NCCL's misc/utils.cc parseStringList), so "=lo:nic0" would select lo and 127.0.0.1.
class AddressLabeler {
 public:
  std::string take(const std::string& nic, int endpoint) {
    std::string label = "lo-" + sanitized(nic);
    if (label.size() <= 15 && used_.insert(label).second) return label;
    // The fallbacks are checked too: "lo-e1" may be another NIC's own label already, and two
    // addresses of one label would let NCCL_SOCKET_IFNAME=lo-e1 bind the wrong one.
    label = "lo-e" + std::to_string(endpoint);
    for (int i = 0; !used_.insert(label).second; ++i) label = "lo-x" + std::to_string(i);
    return label;
  }

 private:
  std::set<std::string> used_;
};

double max_cable_gbps(const Topology& t) {
  double best = 0;
  for (int link : topo::cable_links(t)) {
    best = std::max(best, t.links()[link].gbps);
    best = std::max(best, t.links()[t.links()[link].reverse].gbps);
  }
  return best;
}

std::string shown(double x) {  // 1e+308, not 309 digits
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

}  // namespace

std::string fabric_name_problem(const std::string& name) {
  if (name.empty() || name.size() > 12 ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    return "--name '" + name + "': 1 to 12 characters of a-z, 0-9 and '_' (namespaces are named tf-<name>-<node>)";
  return "";
}

void check_fabric_options(const FabricOptions& o) {
  if (std::string problem = fabric_name_problem(o.name); !problem.empty()) throw std::invalid_argument(problem);
  if (o.rate_mbit != 0 && !(o.rate_mbit >= 0.1 && o.rate_mbit <= 10000))
    throw std::invalid_argument("--rate-mbit " + shown(o.rate_mbit) +
                                ": expected 0.1 to 10000 Mbit/s");
  if (o.scale != 0 && !(o.scale > 0 && o.scale <= 1 && std::isfinite(o.scale)))
    throw std::invalid_argument("--scale " + shown(o.scale) + ": expected 0 < F <= 1");
  if (o.rate_mbit != 0 && o.scale != 0)
    throw std::invalid_argument("--rate-mbit and --scale both given: choose one");
  if (o.mtu < 1280 || o.mtu > 65000)
    throw std::invalid_argument("--mtu " + std::to_string(o.mtu) + ": expected 1280 to 65000");
  if (!(o.peak_slack_us >= 0 && o.peak_slack_us <= 10000))
    throw std::invalid_argument("--peak-slack-us " + shown(o.peak_slack_us) +
                                ": expected 0 to 10000 microseconds");
}

FabricSize estimate_fabric_size(const Topology& t) {
  FabricSize s;
  int switches = 0;
  for (const auto& sw : t.switches()) switches += sw.role != topo::SwitchRole::HostFabric;
  const int hosts = int(t.hosts().size());
  const int cables = int(topo::cable_links(t).size());
  const double endpoints = double(t.endpoints().size());
  s.namespaces = 1 + hosts + switches;
  s.veth_pairs = cables + hosts;
  s.qdiscs = 2 * cables;
  // Compressed tables: about one route per destination that leaves by a non-default cable,
  // per table; bounded by destinations x tables.
  s.routes = int(std::min(endpoints * (hosts + switches), 4.0 * endpoints * (hosts + switches)));
  // Measured on Linux 6.x: a namespace with its loopback and sysctl tables ~250 KiB, a veth
  // pair with two qdiscs ~60 KiB, a route ~0.3 KiB.
  s.memory_mib = (s.namespaces * 250.0 + s.veth_pairs * 60.0 + s.routes * 0.3) / 1024.0;
  return s;
}

void check_fabric_limits(const Topology& t) {
  if (int(t.endpoints().size()) > kMaxFabricEndpoints)
    throw std::invalid_argument("topology " + t.name() + " has " +
                                std::to_string(t.endpoints().size()) +
                                " endpoints; a fabric emulates at most " +
                                std::to_string(kMaxFabricEndpoints));
  int switches = 0;
  for (const auto& sw : t.switches()) switches += sw.role != topo::SwitchRole::HostFabric;
  if (const int64_t namespaces = 1 + int64_t(t.hosts().size()) + switches; namespaces > kMaxFabricNamespaces)
    throw std::invalid_argument("topology " + t.name() + " needs " + std::to_string(namespaces) +
                                " namespaces (" + std::to_string(t.hosts().size()) + " hosts, " +
                                std::to_string(switches) + " switches); a fabric emulates at most " +
                                std::to_string(kMaxFabricNamespaces));
  if (t.links().size() > size_t(kMaxFabricCables))
    if (const size_t cables = topo::cable_links(t).size(); cables > size_t(kMaxFabricCables))
      throw std::invalid_argument("topology " + t.name() + " has " + std::to_string(cables) +
                                  " cables; a fabric emulates at most " + std::to_string(kMaxFabricCables));
}

FabricPlan plan_fabric(const Topology& t, const FabricOptions& options) {
  check_fabric_options(options);
  check_fabric_limits(t);
  FabricPlan plan;
  plan.name = options.name;
  plan.mtu = options.mtu;
  plan.peak_slack_us = options.peak_slack_us;
  const double fastest = max_cable_gbps(t);
  if (fastest <= 0) throw std::invalid_argument("topology " + t.name() + " has no network cable");
  if (options.scale > 0) {
    plan.rate_scale = options.scale;
  } else {
    const double mbit = options.rate_mbit > 0 ? options.rate_mbit : kDefaultRateMbit;
    plan.rate_scale = mbit / (fastest * 1000.0);
  }

  NodeAddressing addressing;
  addressing.ns_of_node.assign(t.graph_node_count(), -1);
  addressing.address_of_node.assign(t.graph_node_count(), "");
  addressing.device_of_link.assign(t.links().size(), "");

  std::set<std::string> ns_names;
  auto ns_name = [&](const std::string& node) {
    std::string base = namespace_prefix(options.name) + sanitized(node);
    std::string name = base;
    for (int i = 2; !ns_names.insert(name).second; ++i) name = base + "~" + std::to_string(i);
    return name;
  };

  Namespace management;
  management.name = ns_name("mgmt");
  management.role = NamespaceRole::Management;
  management.node = "management";
  management.management_address = std::string(kManagementBridgeAddress) + kManagementPrefix;
  plan.namespaces.push_back(std::move(management));
  plan.management_ns = 0;
  plan.management_address = kManagementBridgeAddress;

  std::vector<InterfaceNamer> namers(1);
  std::vector<int> host_ns(t.hosts().size());
  for (int h = 0; h < int(t.hosts().size()); ++h) {
    Namespace ns;
    ns.name = ns_name(t.hosts()[h].name);
    ns.role = NamespaceRole::Host;
    ns.node = t.hosts()[h].name;
    ns.host = h;
    ns.management_interface = "mgmt0";
    ns.management_address = management_address(h) + kManagementPrefix;
    host_ns[h] = int(plan.namespaces.size());
    plan.namespaces.push_back(std::move(ns));
    namers.emplace_back();
  }
  for (int s = 0; s < int(t.switches().size()); ++s) {
    const auto& sw = t.switches()[s];
    const int node = t.graph_node({NodeRef::Type::Switch, s});
    if (sw.role == topo::SwitchRole::HostFabric) {
      addressing.ns_of_node[node] = host_ns[sw.host_index];
      continue;
    }
    Namespace ns;
    ns.name = ns_name(sw.id);
    ns.role = NamespaceRole::Switch;
    ns.node = sw.id;
    ns.switch_index = s;
    ns.forwards = true;
    addressing.ns_of_node[node] = int(plan.namespaces.size());
    addressing.address_of_node[node] = router_address(s);
    ns.addresses.push_back({"lo", router_address(s) + "/32"});
    plan.namespaces.push_back(std::move(ns));
    namers.emplace_back();
  }

  // Endpoints: their namespace, address and interface names.
  std::vector<AddressLabeler> labels(plan.namespaces.size());
  plan.endpoints.resize(t.endpoints().size());
  for (int e = 0; e < int(t.endpoints().size()); ++e) {
    const auto& ep = t.endpoints()[e];
    const int node = t.graph_node({NodeRef::Type::Endpoint, e});
    const int nsi = host_ns[ep.host_index];
    addressing.ns_of_node[node] = nsi;
    addressing.address_of_node[node] = endpoint_address(e);
    std::vector<int> cables;
    for (int l : t.out_links({NodeRef::Type::Endpoint, e}))
      if (t.links()[l].kind != LinkKind::HostFabric) cables.push_back(l);
    for (int l : cables) {
      const std::string peer = t.node_id(t.links()[l].to);
      addressing.device_of_link[l] = cables.size() == 1
                                         ? namers[nsi].take(ep.nic, "nic")
                                         : namers[nsi].take(ep.nic + "." + peer, ep.nic + ".");
      plan.namespaces[nsi].interfaces.push_back(addressing.device_of_link[l]);
    }
    FabricEndpoint fe;
    fe.endpoint = e;
    fe.id = ep.id;
    fe.host = t.hosts()[ep.host_index].name;
    fe.nic = ep.nic;
    fe.gpu = ep.gpu;
    fe.ns = nsi;
    fe.address = endpoint_address(e);
    fe.interface = cables.size() == 1 ? addressing.device_of_link[cables[0]] : "lo";
    fe.address_label = fe.interface == "lo" ? labels[nsi].take(ep.nic, e) : fe.interface;
    plan.namespaces[nsi].addresses.push_back({fe.interface, fe.address + "/32"});
    // A node with several ports forwards torus traffic (NAP); a BiGraph host does not.
    if (cables.size() > 1) plan.namespaces[nsi].forwards = true;
    plan.endpoints[e] = fe;
  }
  // Switch ports, named after what they lead to.
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::HostFabric || l.from.type != NodeRef::Type::Switch) continue;
    const int nsi = addressing.ns_of_node[t.graph_node(l.from)];
    addressing.device_of_link[l.id] = namers[nsi].take(t.node_id(l.to), "p");
    plan.namespaces[nsi].interfaces.push_back(addressing.device_of_link[l.id]);
  }

  for (int link : topo::cable_links(t)) {
    const auto& l = t.links()[link];
    Cable c;
    c.name = topo::cable_name(t, link);
    c.link = link;
    c.reverse = l.reverse;
    c.a = {addressing.ns_of_node[t.graph_node(l.from)], addressing.device_of_link[link]};
    c.b = {addressing.ns_of_node[t.graph_node(l.to)], addressing.device_of_link[l.reverse]};
    c.address_a = addressing.address_of_node[t.graph_node(l.from)];
    c.address_b = addressing.address_of_node[t.graph_node(l.to)];
    c.mbit_ab = l.gbps * 1000.0 * plan.rate_scale;
    c.mbit_ba = t.links()[l.reverse].gbps * 1000.0 * plan.rate_scale;
    // --scale alone bounds no rate: a 400 Gb/s cable at scale 1 would ask tbf for a queue
    // limit past its 32-bit field (fabric_script.cpp), refused by tc once the namespaces exist.
    if (c.mbit_ab > kMaxCableMbit || c.mbit_ba > kMaxCableMbit)
      throw std::invalid_argument("cable " + c.name + " would run at " + shown(std::max(c.mbit_ab, c.mbit_ba)) +
                                  " Mbit/s, above the " + shown(kMaxCableMbit) +
                                  " Mbit/s this machine's shapers emulate; lower --scale");
    if (c.mbit_ab < 0.01 || c.mbit_ba < 0.01)
      throw std::invalid_argument("cable " + c.name + " would run at " +
                                  std::to_string(std::min(c.mbit_ab, c.mbit_ba)) +
                                  " Mbit/s, below what tbf can shape; raise --rate-mbit");
    plan.cables.push_back(std::move(c));
  }

  compile_routes(t, addressing, plan);
  return plan;
}

topo::Topology emulated_topology(const Topology& topology, const FabricPlan& plan) {
  topo::Topology t = topology;
  t.scale_rates(plan.rate_scale);
  return t;
}

std::string address_without_prefix(const std::string& address) { return address.substr(0, address.find('/')); }

}  // namespace topocoll::fabric
