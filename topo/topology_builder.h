// Assembles a Topology piece by piece (the JSON loader and the generators use it);
// finalize() derives the lookup tables, the reverse links and the host fabrics and checks
// that every endpoint can reach every other.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "topo/topology.h"

namespace topocoll::topo {

class TopologyBuilder {
 public:
  TopologyBuilder(TopologyKind kind, std::string name);

  // A host with its fabric; endpoints name their host, and a host first named by an
  // endpoint is created with the default fabric (NVSwitch, 2400 Gb/s, 0.5 us).
  int add_host(const std::string& name, HostFabricKind fabric, double fabric_gbps,
               double fabric_latency_us);
  std::optional<int> find_host(const std::string& name) const;
  // Sets host_index from endpoint.host; returns the endpoint index.
  int add_endpoint(Endpoint endpoint);
  int add_switch(Switch sw);
  // One cable: two directed links, a->b then b->a. Returns the id of a->b.
  int add_cable(NodeRef a, NodeRef b, LinkKind kind, double gbps, double latency_us);
  // BiGraph: cable an endpoint's NIC to its switch (sets attach_switch).
  int attach(int endpoint, int sw, double gbps, double latency_us);
  void set_nap_shape(int nodes_per_package, int local_switches, std::vector<int> torus);

  const std::vector<Endpoint>& endpoints() const { return t_.endpoints_; }
  const std::vector<Switch>& switches() const { return t_.switches_; }

  // Throws TopologyError("", reason) when the network has no endpoint or is disconnected.
  Topology finalize() &&;

 private:
  Topology t_;
  std::unordered_map<std::string, int> host_by_name_;
};

inline NodeRef endpoint_node(int index) { return {NodeRef::Type::Endpoint, index}; }
inline NodeRef switch_node(int index) { return {NodeRef::Type::Switch, index}; }

}  // namespace topocoll::topo
