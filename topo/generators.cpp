#include "topo/generators.h"

#include <cmath>
#include <sstream>

#include "topo/topology_builder.h"
#include "topo/topology_error.h"

namespace topocoll::topo {

namespace {

std::string number(double x) {
  std::ostringstream out;
  out.precision(10);
  out << x;
  return out.str();
}

void check_count(long value, long min, long max, const std::string& pointer,
                 const std::string& what) {
  if (value < min || value > max)
    throw TopologyError(pointer, what + " must be in [" + std::to_string(min) + ", " +
                                     std::to_string(max) + "], got " + std::to_string(value));
}

}  // namespace

void check_gbps(double gbps, const std::string& pointer) {
  // Below 1 Mb/s a cable is a typo (1e-308 would make every predicted time infinite).
  if (!(gbps >= kMinGbps))
    throw TopologyError(pointer, "rate must be >= " + number(kMinGbps) + " Gb/s (1 Mb/s), got " +
                                     number(gbps));
  if (gbps > kMaxGbps)
    throw TopologyError(pointer, "rate " + number(gbps) + " Gb/s is absurd (limit " +
                                     number(kMaxGbps) + " Gb/s)");
}

void check_latency_us(double latency_us, const std::string& pointer) {
  if (!(latency_us >= 0))
    throw TopologyError(pointer, "latency must be >= 0 us, got " + number(latency_us));
  if (latency_us > kMaxLatencyUs)
    throw TopologyError(pointer, "latency " + number(latency_us) + " us is absurd (limit " +
                                     number(kMaxLatencyUs) + " us)");
}

void check_bigraph_shape(const BiGraphShape& s, const std::string& prefix) {
  check_count(s.switches_per_group, 1, 1024, prefix + "/switches_per_group", "switches per group");
  check_count(s.endpoints_per_switch, 1, 1024, prefix + "/endpoints_per_switch",
              "endpoints per switch");
  const long total = 2L * s.switches_per_group * s.endpoints_per_switch;
  if (total > kMaxEndpoints)
    throw TopologyError(prefix + "/endpoints_per_switch",
                        std::to_string(total) + " endpoints exceed the limit of " +
                            std::to_string(kMaxEndpoints));
  check_count(s.gpus_per_server, 1, 1024, prefix + "/gpus_per_server", "GPUs per server");
  if (total % s.gpus_per_server != 0)
    throw TopologyError(prefix + "/gpus_per_server",
                        std::to_string(total) + " endpoints do not fill servers of " +
                            std::to_string(s.gpus_per_server) + " GPUs");
  if (s.nic_spread != "alternate" && s.nic_spread != "upper-first" && s.nic_spread != "single")
    throw TopologyError(prefix + "/nic_spread",
                        "unknown NIC spread \"" + s.nic_spread +
                            "\" (expected alternate, upper-first or single)");
  check_gbps(s.link_gbps, prefix + "/link_gbps");
  check_latency_us(s.link_latency_us, prefix + "/link_latency_us");
  check_latency_us(s.switch_latency_us, prefix + "/switch_latency_us");
  check_gbps(s.host_fabric_gbps, prefix + "/host_fabric_gbps");
  check_latency_us(s.host_fabric_latency_us, prefix + "/host_fabric_latency_us");
  const long needed = long(s.endpoints_per_switch) + s.switches_per_group;
  if (s.switch_ports < 0 || s.switch_ports > 65536)
    throw TopologyError(prefix + "/switch_ports",
                        "must be in [0, 65536], got " + std::to_string(s.switch_ports));
  if (s.switch_ports != 0 && s.switch_ports < needed)
    throw TopologyError(prefix + "/switch_ports",
                        std::to_string(s.switch_ports) + " ports cannot hold " +
                            std::to_string(s.endpoints_per_switch) + " endpoints and " +
                            std::to_string(s.switches_per_group) + " inter-group links");
}

Topology generate_bigraph(const BiGraphShape& s) {
  check_bigraph_shape(s, "/shape");
  const int S = s.switches_per_group, E = s.endpoints_per_switch, G = s.gpus_per_server;
  const int total = 2 * S * E, servers = total / G;
  const int ports = s.switch_ports != 0 ? s.switch_ports : E + S;

  // Group of NIC i of server k (0 upper, 1 lower).
  auto group_of = [&](int k, int i) {
    if (s.nic_spread == "alternate") return (k * G + i) % 2;  // = i % 2 for even G
    if (s.nic_spread == "upper-first") return i < G / 2 ? 0 : 1;
    return k % 2;  // single: whole servers alternate
  };
  long in_group[2] = {0, 0};
  for (int k = 0; k < servers; ++k)
    for (int i = 0; i < G; ++i) ++in_group[group_of(k, i)];
  for (int g = 0; g < 2; ++g)
    if (in_group[g] > long(S) * E)
      throw TopologyError("/shape/nic_spread",
                          "\"" + s.nic_spread + "\" puts " + std::to_string(in_group[g]) +
                              " NICs in the " + (g == 0 ? "upper" : "lower") + " group, which has " +
                              std::to_string(S * E) + " access ports");

  TopologyBuilder b(TopologyKind::BiGraph,
                    s.name.empty() ? "bigraph-" + std::to_string(total) : s.name);
  int first[2];
  for (int g = 0; g < 2; ++g) {
    first[g] = int(b.switches().size());
    for (int i = 0; i < S; ++i) {
      Switch sw;
      sw.id = (g == 0 ? "U" : "L") + std::to_string(i);
      sw.role = g == 0 ? SwitchRole::Upper : SwitchRole::Lower;
      sw.index_in_role = i;
      sw.ports = ports;
      sw.latency_us = s.switch_latency_us;
      b.add_switch(sw);
    }
  }
  // Switches fill in order: a group's c-th NIC lands on switch c / E of that group.
  int cursor[2] = {0, 0};
  for (int k = 0; k < servers; ++k) {
    std::string host = "s" + std::to_string(k);
    b.add_host(host, s.host_fabric, s.host_fabric_gbps, s.host_fabric_latency_us);
    for (int i = 0; i < G; ++i) {
      Endpoint e;
      e.id = host + ".g" + std::to_string(i);
      e.host = host;
      e.gpu = i;
      e.nic = "nic" + std::to_string(i);
      int g = group_of(k, i);
      int endpoint = b.add_endpoint(e);
      b.attach(endpoint, first[g] + cursor[g]++ / E, s.link_gbps, s.link_latency_us);
    }
  }
  for (int u = 0; u < S; ++u)
    for (int l = 0; l < S; ++l)
      b.add_cable(switch_node(first[0] + u), switch_node(first[1] + l), LinkKind::InterGroup,
                  s.link_gbps, s.link_latency_us);
  return std::move(b).finalize();
}

void check_nap_shape(const NapShape& s, const std::string& prefix) {
  check_count(s.packages, 1, 4096, prefix + "/packages", "packages");
  check_count(s.nodes_per_package, 1, 1024, prefix + "/nodes_per_package", "nodes per package");
  if (long(s.packages) * s.nodes_per_package > kMaxEndpoints)
    throw TopologyError(prefix + "/nodes_per_package",
                        std::to_string(long(s.packages) * s.nodes_per_package) +
                            " nodes exceed the limit of " + std::to_string(kMaxEndpoints));
  check_count(s.local_switches, 1, 256, prefix + "/local_switches", "local switches");
  const long intra_cables = long(s.packages) * s.nodes_per_package * s.local_switches;
  if (intra_cables > kMaxCables)
    throw TopologyError(prefix + "/local_switches",
                        std::to_string(intra_cables) + " node-to-switch cables exceed the limit of " +
                            std::to_string(kMaxCables));
  if (s.torus.empty() || s.torus.size() > 8)
    throw TopologyError(prefix + "/torus", "a torus needs 1 to 8 dimensions, got " +
                                               std::to_string(s.torus.size()));
  long product = 1;
  std::string dims;
  for (size_t d = 0; d < s.torus.size(); ++d) {
    check_count(s.torus[d], 1, 4096, prefix + "/torus/" + std::to_string(d), "torus dimension");
    product *= s.torus[d];
    if (product > 4096) product = 4097;  // keeps the product bounded; reported as mismatch
    dims += (d ? "x" : "") + std::to_string(s.torus[d]);
  }
  if (product != s.packages)
    throw TopologyError(prefix + "/torus", "torus " + dims + " holds " +
                                               (product > 4096 ? std::string("over 4096")
                                                               : std::to_string(product)) +
                                               " packages, not " + std::to_string(s.packages));
  const int node_ports = s.node_ports != 0 ? s.node_ports : s.local_switches;
  const int switch_ports = s.switch_ports != 0 ? s.switch_ports : s.nodes_per_package;
  if (s.node_ports < 0 || s.node_ports > 4096)
    throw TopologyError(prefix + "/node_ports",
                        "must be in [0, 4096], got " + std::to_string(s.node_ports));
  if (s.switch_ports < 0 || s.switch_ports > 65536)
    throw TopologyError(prefix + "/switch_ports",
                        "must be in [0, 65536], got " + std::to_string(s.switch_ports));
  if (s.local_switches > node_ports)
    throw TopologyError(prefix + "/local_switches",
                        std::to_string(s.local_switches) + " local switches need " +
                            std::to_string(s.local_switches) +
                            " ports per node, but a node has " + std::to_string(node_ports));
  if (s.nodes_per_package > switch_ports)
    throw TopologyError(prefix + "/nodes_per_package",
                        std::to_string(s.nodes_per_package) + " nodes need " +
                            std::to_string(s.nodes_per_package) +
                            " ports per local switch, but a local switch has " +
                            std::to_string(switch_ports));
  check_count(s.gpus_per_host, 1, 1024, prefix + "/gpus_per_host", "GPUs per host");
  check_gbps(s.intra_gbps, prefix + "/intra_gbps");
  check_latency_us(s.intra_latency_us, prefix + "/intra_latency_us");
  check_gbps(s.inter_gbps, prefix + "/inter_gbps");
  check_latency_us(s.inter_latency_us, prefix + "/inter_latency_us");
  check_latency_us(s.switch_latency_us, prefix + "/switch_latency_us");
  check_gbps(s.host_fabric_gbps, prefix + "/host_fabric_gbps");
  check_latency_us(s.host_fabric_latency_us, prefix + "/host_fabric_latency_us");
}

void add_nap_wiring(TopologyBuilder& b, const NapShape& s) {
  const int P = s.packages, N = s.nodes_per_package, k = s.local_switches;
  b.set_nap_shape(N, k, s.torus);
  std::vector<int> node_at(size_t(P) * N, -1);
  for (int e = 0; e < int(b.endpoints().size()); ++e) {
    const Endpoint& ep = b.endpoints()[e];
    node_at[size_t(ep.package) * N + ep.node] = e;
  }
  const int switch_ports = s.switch_ports != 0 ? s.switch_ports : N;
  std::vector<int> first_switch(P);
  for (int p = 0; p < P; ++p) {
    first_switch[p] = int(b.switches().size());
    for (int j = 0; j < k; ++j) {
      Switch sw;
      sw.id = "p" + std::to_string(p) + ".s" + std::to_string(j);
      sw.role = SwitchRole::Local;
      sw.index_in_role = j;
      sw.package = p;
      sw.ports = switch_ports;
      sw.latency_us = s.switch_latency_us;
      b.add_switch(sw);
    }
  }
  // NAP: every node has one port to each of the k local switches of its package.
  for (int p = 0; p < P; ++p)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < k; ++j)
        b.add_cable(endpoint_node(node_at[size_t(p) * N + i]), switch_node(first_switch[p] + j),
                    LinkKind::IntraPackage, s.intra_gbps, s.intra_latency_us);
  // Torus: node i of a package to node i of its +1 neighbour in every dimension. A ring of
  // two packages has one cable (its +1 and -1 neighbours coincide); a ring of one has none.
  auto coord_of = [&](int p) {
    std::vector<int> c(s.torus.size());
    for (int d = int(s.torus.size()) - 1; d >= 0; --d) {
      c[d] = p % s.torus[d];
      p /= s.torus[d];
    }
    return c;
  };
  auto package_at = [&](const std::vector<int>& c) {
    int p = 0;
    for (size_t d = 0; d < s.torus.size(); ++d) p = p * s.torus[d] + c[d];
    return p;
  };
  for (size_t d = 0; d < s.torus.size(); ++d) {
    const int size = s.torus[d];
    if (size < 2) continue;
    for (int p = 0; p < P; ++p) {
      std::vector<int> c = coord_of(p);
      if (size == 2 && c[d] == 1) continue;
      c[d] = (c[d] + 1) % size;
      const int q = package_at(c);
      for (int i = 0; i < N; ++i)
        b.add_cable(endpoint_node(node_at[size_t(p) * N + i]),
                    endpoint_node(node_at[size_t(q) * N + i]), LinkKind::InterPackage,
                    s.inter_gbps, s.inter_latency_us);
    }
  }
}

Topology generate_nap(const NapShape& s) {
  check_nap_shape(s, "/shape");
  TopologyBuilder b(TopologyKind::Nap, s.name.empty() ? "nap-" + std::to_string(s.packages) +
                                                            "x" +
                                                            std::to_string(s.nodes_per_package)
                                                      : s.name);
  for (int p = 0; p < s.packages; ++p)
    for (int i = 0; i < s.nodes_per_package; ++i) {
      Endpoint e;
      e.id = "p" + std::to_string(p) + ".n" + std::to_string(i);
      // Consecutive nodes of a package share a host.
      e.host = "p" + std::to_string(p) + ".h" + std::to_string(i / s.gpus_per_host);
      e.gpu = i % s.gpus_per_host;
      e.nic = "nic" + std::to_string(e.gpu);
      e.package = p;
      e.node = i;
      b.add_host(e.host, s.host_fabric, s.host_fabric_gbps, s.host_fabric_latency_us);
      b.add_endpoint(e);
    }
  add_nap_wiring(b, s);
  return std::move(b).finalize();
}

}  // namespace topocoll::topo
