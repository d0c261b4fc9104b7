// Topology model: endpoints (one GPU with its NIC), switches, directed links, hosts.
// Two kinds of network are described (docs/topology.md):
//  - BiGraph (EFLOPS, HPCA'20): switches in an upper and a lower group, complete bipartite
//    between the groups, no links inside a group; every endpoint's NIC is cabled to one switch.
//  - NAP (Hou et al.): packages of N nodes, each node cabled to every one of k local switches
//    (a crossbar: any two nodes of a package are one switch apart); node i of every package
//    is joined to node i of the neighbouring packages by torus links (2-D or more).
// Endpoints of one host additionally reach each other over the host fabric (NVSwitch,
// NVLink or PCIe), modelled as one pseudo-switch per host so injection limits hold.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace topocoll::topo {

enum class TopologyKind { BiGraph, Nap };
enum class SwitchRole { Upper, Lower, Local, HostFabric };
enum class LinkKind {
  Access,        // endpoint <-> BiGraph switch
  InterGroup,    // BiGraph upper <-> lower switch
  IntraPackage,  // NAP node <-> local switch
  InterPackage,  // NAP torus link between node i of neighbouring packages
  HostFabric,    // endpoint <-> its host's fabric pseudo-switch
};
enum class HostFabricKind { NVSwitch, NVLink, PCIe };

std::string_view to_string(TopologyKind);
std::string_view to_string(SwitchRole);
std::string_view to_string(LinkKind);
std::string_view to_string(HostFabricKind);

struct Endpoint {
  std::string id;    // unique, e.g. "s3.g1" (BiGraph) or "p0.n5" (NAP); used by plans and drawings
  std::string host;  // host name as the communicator reports it
  int gpu = 0;       // CUDA device index on that host
  std::string nic;   // NIC name on that host, e.g. "mlx5_1"
  int host_index = -1;
  // BiGraph: the switch its NIC is cabled to (index into switches()).
  int attach_switch = -1;
  // NAP: package index and node index inside the package.
  int package = -1;
  int node = -1;
};

struct Switch {
  std::string id;  // unique, e.g. "U0", "L3" (BiGraph), "p2.s1" (NAP), "s3.fabric" (host fabric)
  SwitchRole role = SwitchRole::Upper;
  int index_in_role = 0;   // BiGraph: index within its group; NAP: j of the package's k switches
  int package = -1;        // NAP local switches only
  int host_index = -1;     // host fabric pseudo-switches only
  int ports = 0;           // 0 = unlimited (host fabric)
  double latency_us = 0;   // forwarding latency
};

// A node of the graph: an endpoint or a switch.
struct NodeRef {
  enum class Type : uint8_t { Endpoint, Switch } type = Type::Endpoint;
  int index = -1;
  friend bool operator==(const NodeRef&, const NodeRef&) = default;
};

// Directed link; every cable appears twice, once per direction.
struct Link {
  int id = -1;  // index into links()
  NodeRef from, to;
  LinkKind kind = LinkKind::Access;
  double gbps = 0;        // one direction
  double latency_us = 0;  // propagation + serialisation start
  int reverse = -1;       // id of the opposite direction
};

struct Host {
  std::string name;
  std::vector<int> endpoints;  // indices into endpoints()
  HostFabricKind fabric = HostFabricKind::NVSwitch;
  double fabric_gbps = 0;       // per GPU, one direction
  double fabric_latency_us = 0;
  int fabric_switch = -1;       // pseudo-switch index, -1 when the host has one endpoint
};

// One way through the network; `fraction` of a flow's bytes take it (NAP flows may stripe
// over the k local switches; everything else is a single path with fraction 1).
struct Path {
  std::vector<int> links;  // link ids in order from source to destination
  double fraction = 1.0;
};

struct RouteHint {
  // NAP, same package: pin the flow to local switch j (0..k-1) instead of striping.
  int local_switch = -1;
};

// Shape parameters the generators expand into explicit topologies.
struct BiGraphShape {
  std::string name;  // empty: "bigraph-<endpoints>"
  int switches_per_group = 4;
  int endpoints_per_switch = 4;  // access ports used per switch
  int gpus_per_server = 1;
  // How a server's NICs spread over the groups: "alternate" (NIC i to group i%2),
  // "upper-first" (first half upper) or "single" (all NICs of a server in one group,
  // servers alternating).
  std::string nic_spread = "alternate";
  double link_gbps = 100;
  double link_latency_us = 1.0;
  double switch_latency_us = 0.5;
  double host_fabric_gbps = 2400;  // NVSwitch-class, per GPU
  double host_fabric_latency_us = 0.5;
  int switch_ports = 0;  // 0 = endpoints_per_switch + switches_per_group
  HostFabricKind host_fabric = HostFabricKind::NVSwitch;
};

struct NapShape {
  std::string name;  // empty: "nap-<packages>x<nodes_per_package>"
  int packages = 4;
  int nodes_per_package = 8;
  int local_switches = 4;
  std::vector<int> torus = {2, 2};  // product must equal packages
  // NAP paper Table II: intra-package 512 bit/ns = 512 Gb/s, inter-package 256 Gb/s,
  // link latency 90 ns / 200 ns, router latency 5 ns.
  double intra_gbps = 512;
  double intra_latency_us = 0.09;
  double inter_gbps = 256;
  double inter_latency_us = 0.2;
  double switch_latency_us = 0.005;
  int node_ports = 0;    // NIC ports per node; 0 = local_switches (one per local switch)
  int switch_ports = 0;  // ports per local switch; 0 = nodes_per_package
  int gpus_per_host = 1; // consecutive nodes of a package share a host
  HostFabricKind host_fabric = HostFabricKind::NVSwitch;
  double host_fabric_gbps = 2400;  // per GPU, one direction
  double host_fabric_latency_us = 0.5;
};

class Topology {
 public:
  Topology() = default;

  TopologyKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  const std::vector<Switch>& switches() const { return switches_; }
  const std::vector<Link>& links() const { return links_; }
  const std::vector<Host>& hosts() const { return hosts_; }

  // NAP only.
  int nodes_per_package() const { return nodes_per_package_; }
  int local_switches() const { return local_switches_; }
  const std::vector<int>& torus_dims() const { return torus_; }
  int package_count() const;
  // BiGraph only: switches per group.
  int switches_per_group() const { return switches_per_group_; }

  // The host called `name`: the exact name, else the one host whose name agrees up to the
  // first dot ("node7.cluster.local" finds "node7" and the reverse), as gethostname() may
  // or may not include the domain. Nothing when no host or several match.
  std::optional<int> find_host(std::string_view name) const;
  // GPU `gpu` of the host find_host(host) finds.
  std::optional<int> find_endpoint(std::string_view host, int gpu) const;
  std::optional<int> find_endpoint_by_id(std::string_view id) const;
  std::optional<int> find_switch(std::string_view id) const;
  std::string node_id(NodeRef n) const;

  // The links between two endpoints (docs/topology.md, "Routing"). Same endpoint: empty.
  std::vector<Path> route(int from_endpoint, int to_endpoint, RouteHint hint = {}) const;
  // Switch hops of the longest shortest route (0 for the same host).
  // Hops = nodes a route passes through between its two endpoints (switches, and NAP nodes
  // that forward torus traffic) = links - 1; routes inside one host do not count.
  int diameter_hops() const;

  // Graph helpers for contention analysis and drawing. Graph nodes are numbered endpoints
  // first, then switches.
  int graph_node_count() const { return int(endpoints_.size() + switches_.size()); }
  int graph_node(NodeRef n) const;
  NodeRef node_ref(int graph_node) const;
  std::span<const int> out_links(NodeRef n) const;  // link ids leaving n, ascending
  std::optional<int> find_link(NodeRef from, NodeRef to) const;
  // End-to-end latency of one path: its links plus the forwarding latency of every switch
  // it passes through.
  double latency_us(const Path& path) const;

  // BiGraph: the switches of one group (Upper or Lower) ordered by index_in_role.
  const std::vector<int>& group_switches(SwitchRole group) const;
  // NAP: local switch j of a package, the endpoint that is node n of a package, and the
  // torus coordinate of a package (row-major: dimension 0 varies slowest).
  int local_switch(int package, int j) const;
  int package_node(int package, int node) const;
  std::vector<int> torus_coord(int package) const;
  int package_at(const std::vector<int>& coord) const;

  // Rates as an emulation or a measurement sees them: every rate (cables and host fabrics)
  // times `factor` (a fabric emulated at a fraction of the real speed), or one direction of
  // one cable set to `gbps` (a degraded cable). Both throw std::invalid_argument for a
  // rate that is not positive and finite.
  void scale_rates(double factor);
  void set_link_gbps(int link, double gbps);

  // Construction (used by the JSON loader and the generators); finalize() derives indices,
  // reverse links and host fabrics and checks connectivity.
  friend class TopologyBuilder;

 private:
  TopologyKind kind_ = TopologyKind::BiGraph;
  std::string name_;
  std::vector<Endpoint> endpoints_;
  std::vector<Switch> switches_;
  std::vector<Link> links_;
  std::vector<Host> hosts_;
  int nodes_per_package_ = 0;
  int local_switches_ = 0;
  int switches_per_group_ = 0;
  std::vector<int> torus_;
  // Lookup tables built by finalize().
  std::vector<std::vector<int>> out_links_;  // per graph node (endpoints then switches)
  std::vector<int> upper_switches_, lower_switches_;  // BiGraph, by index_in_role
  std::vector<int> package_switches_;  // NAP: [package * k + j] -> switch index
  std::vector<int> package_nodes_;     // NAP: [package * N + node] -> endpoint index

  std::vector<Path> route_bigraph(int from, int to) const;
  std::vector<Path> route_nap(int from, int to, RouteHint hint) const;
  std::vector<int> shortest_links(NodeRef from, NodeRef to) const;
};

}  // namespace topocoll::topo
