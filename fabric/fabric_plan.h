// Fabric plan: everything `topocoll fabric up` builds for a topology, computed from the
// topology alone (no system calls), so it can be checked in tests, written to the fabric's
// state file and undone exactly (docs/fabric.md).
//
//  - a network namespace per host: one interface per NIC cable (NAP nodes: one per local
//    switch and per torus neighbour), endpoints of one host reach each other through the
//    namespace itself (the host fabric);
//  - a router namespace per switch; NAP hosts forward torus traffic themselves;
//  - every cable a veth pair, each end shaped with tbf at the cable's emulated rate, so each
//    direction has its own rate as in the model;
//  - routes compiled from Topology::route (fabric/route_compiler.h): the emulation and the
//    cost model cannot disagree about which cables a flow uses;
//  - a management network (one unshaped bridge to every host namespace) for the bootstrap
//    rendezvous, as a cluster's front-end network carries it, so that faults on the data
//    fabric never cut a rank off from its group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/topology.h"

namespace topocoll::fabric {

inline constexpr double kDefaultPeakSlackUs = 100;

// What every namespace of fabric `name` is called by ("tf-<name>-<node>"): `down` and
// `--force` remove by it, and a record listing another name is refused (fabric_record.h).
inline std::string namespace_prefix(const std::string& name) { return "tf-" + name + "-"; }

struct FabricOptions {
  std::string name = "tf";  // [a-z0-9_], 1..12 characters: namespaces are "tf-<name>-<node>"
  // Emulated rates: either the fastest cable class runs at rate_mbit (the others keep their
  // ratio to it), or every rate is the topology's times `scale`. Neither: rate_mbit 20.
  double rate_mbit = 0;
  double scale = 0;
  int mtu = 9000;  // jumbo frames: fewer packets per byte, so the CPU is not the bottleneck
  // How late the kernel's timer may release a waiting packet before the cable loses rate:
  // the peak bucket holds one frame plus what the cable sends in this time
  // (fabric_script.cpp, shaper_arguments). 0 = one frame only.
  double peak_slack_us = kDefaultPeakSlackUs;
};

// One route of a table: destination "default" or "a.b.c.d/32", one or more next hops
// (several = multipath, weighted by the fraction of the flow each path carries).
struct NextHop {
  std::string via;     // the next node's address (unnumbered: reached "onlink")
  std::string device;  // the cable's interface on this side
  int weight = 1;
};
struct Route {
  std::string destination;
  std::vector<NextHop> hops;
  std::string source;  // preferred source address for locally made packets ("" = none)
};
inline constexpr int kMainTable = 254;
struct RouteTable {
  int id = kMainTable;
  std::string purpose;  // "origin s3.g0", "transit U0", "stripe 2 of p0.n1", ...
  std::vector<Route> routes;
};
// An `ip rule`: packets matching every set field use `table`.
struct Rule {
  int priority = 0;
  std::string from;     // source address/32, "" = any
  std::string iif;      // input interface, "" = any
  uint32_t fwmark = 0;  // 0 = any
  int table = kMainTable;
};

enum class NamespaceRole { Host, Switch, Management };

struct Namespace {
  std::string name;  // tf-<fabric>-<node>
  NamespaceRole role = NamespaceRole::Host;
  std::string node;  // host name, switch id, or "management"
  int host = -1;     // host index (Host role)
  int switch_index = -1;
  std::vector<std::string> interfaces;  // every fabric interface, in creation order
  // (interface, address/32): endpoint addresses on their NIC (or on lo when a node has
  // several ports), router addresses on lo.
  std::vector<std::pair<std::string, std::string>> addresses;
  bool forwards = false;  // routers and NAP nodes forward; hosts of a BiGraph do not
  std::vector<RouteTable> tables;
  std::vector<Rule> rules;
  std::string management_interface;  // "" for the management namespace itself
  std::string management_address;    // address/prefix on the management network
};

struct VethEnd {
  int ns = -1;  // index into FabricPlan::namespaces
  std::string interface;
};

struct Cable {
  std::string name;  // topo::cable_name
  int link = -1;     // the topology's first direction, a -> b; link + its reverse = b -> a
  int reverse = -1;
  VethEnd a, b;
  std::string address_a, address_b;  // the address of the node at each end (next hops)
  double mbit_ab = 0, mbit_ba = 0;   // emulated rate of each direction
};

struct FabricEndpoint {
  int endpoint = -1;
  std::string id;       // topology endpoint id
  std::string host;     // topology host name (the rank's hostname inside the fabric)
  std::string nic;      // topology NIC name (what the net plugin binds by)
  int gpu = 0;          // the GPU index of the endpoint on its host
  int ns = -1;
  std::string address;  // where its rank binds (no prefix)
  std::string interface;  // its NIC interface (single-port endpoints), or "lo"
  // The name programs see its address under (getifaddrs; what NCCL_SOCKET_IFNAME matches):
  // the NIC's interface, or for an address on lo the label "lo-<nic>", so that a program
  // choosing by name gets this address and not lo's 127.0.0.1 (no ':', which NCCL_SOCKET_IFNAME
  // reads as a port).
  std::string address_label;
};

struct FabricPlan {
  std::string name;
  double rate_scale = 0;  // emulated Gb/s = topology Gb/s x rate_scale
  int mtu = 9000;
  double peak_slack_us = kDefaultPeakSlackUs;
  std::vector<Namespace> namespaces;  // management first, then hosts, then switches
  std::vector<Cable> cables;
  std::vector<FabricEndpoint> endpoints;  // indexed like the topology's endpoints
  // Socket marks a connection's lanes carry so that they take different paths where a flow
  // stripes (NAP: one per local switch); empty when no route stripes.
  std::vector<uint32_t> lane_marks;
  int management_ns = 0;
  std::string management_address;  // the bootstrap root's address (no prefix)
  std::vector<std::string> notes;   // routes the kernel can only approximate (multipath hashing)

  const Namespace& ns_of(const FabricEndpoint& e) const { return namespaces[e.ns]; }
};

// What a fabric of this topology needs from the machine, and whether it fits.
struct FabricSize {
  int namespaces = 0, veth_pairs = 0, routes = 0, qdiscs = 0;
  double memory_mib = 0;  // kernel memory estimate (measured per namespace, veth and route)
};
FabricSize estimate_fabric_size(const topo::Topology& topology);

// Throws std::invalid_argument naming the option or the part of the topology that cannot be
// emulated (bad name, rates, a topology too large for routes to be compiled per pair).
FabricPlan plan_fabric(const topo::Topology& topology, const FabricOptions& options);

// The checks of plan_fabric's topology alone, made before anything is planned: at most
// 1024 endpoints, 4096 namespaces (hosts and switches) and 32768 cables; throws
// std::invalid_argument naming the count.
void check_fabric_limits(const topo::Topology& topology);

// The checks of plan_fabric's options alone (name, rates, MTU, peak slack).
void check_fabric_options(const FabricOptions& options);
// "" when `name` may name a fabric: 1 to 12 of a-z, 0-9 and '_', so its namespaces
// tf-<name>-<node> belong to it alone ('-' ends the name) and its files <state dir>/<name>.*
// stay in that directory; else what is wrong with it.
std::string fabric_name_problem(const std::string& name);

// The topology as the fabric runs it: every rate times the plan's rate_scale. Predictions
// for a run on the fabric come from this one.
topo::Topology emulated_topology(const topo::Topology& topology, const FabricPlan& plan);

// "10.0.0.1/16" -> "10.0.0.1": an address of the plan without its prefix length.
std::string address_without_prefix(const std::string& address);

}  // namespace topocoll::fabric
