// The devices the net face offers NCCL: one per local NIC. With a topology (TOPOCOLL_TOPO_FILE)
// they are this host's endpoints' NICs, with speed and latency from their access links;
// otherwise the host's interfaces chosen by TOPOCOLL_NET_IFNAME / NCCL_SOCKET_IFNAME.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/nic_resolver.h"
#include "net/socket_address.h"
#include "plugin/process_context.h"
#include "topo/topology.h"

namespace topocoll::plugin {

struct NetDevice {
  std::string name;                 // NIC name as the topology or the kernel calls it
  std::string nccl_name;            // the name NCCL is told (plugin/net/nccl_topology_names.h)
  net::SocketAddress address;       // what its sockets bind to
  int speed_mbps = 0;
  float latency_us = 0;
  int endpoint = -1;                // topology endpoint using this NIC (-1 without topology)
  std::string pci_path;             // empty when unknown or virtual
};

struct DeviceCatalog {
  std::vector<NetDevice> devices;
  std::shared_ptr<const topo::Topology> topology;  // null without one
  uint32_t topology_fingerprint = 0;               // handle_fingerprint of the topology's; 0 without
  std::string host;                                // this host's name in the topology
};

using net::parse_plane_addresses;  // TOPOCOLL_NET_PLANE_ADDRS (net/nic_resolver.h)

// The 32 bits of a topology's fingerprint (topo/topology_fingerprint.h) that a connect
// handle carries in its user_data, so both ends can tell whether they loaded the same
// topology before trusting each other's endpoint index: 0 for none, never 0 for one.
uint32_t handle_fingerprint(uint64_t topology_fingerprint);

// The devices of this process (its topology, host and TOPOCOLL_NET_* settings), named apart
// from NCCL_TOPO_FILE's NICs; logs what it found (INFO) or why it fell back (WARN).
DeviceCatalog discover_devices(const ProcessContext& context);

}  // namespace topocoll::plugin
