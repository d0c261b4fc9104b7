// Plane-aware routing: which local NIC a connection to a peer endpoint leaves through.
// The topology's route from each local NIC to the peer is compared; the fewest links wins
// (for BiGraph: the NIC on the group opposite the peer's switch gives the direct one-link
// inter-group path the HD schedule is planned on, EFLOPS HPCA'20 sec. IV), and NCCL's own
// choice is kept on a tie.
#pragma once

#include <string>
#include <vector>

#include "plugin/net/net_device.h"
#include "topo/topology.h"

namespace topocoll::plugin {

struct PlaneChoice {
  int device = -1;       // index into the device list
  int links = -1;        // links of the chosen route (-1: not routed)
  std::string why;       // one line for the INFO log
};

PlaneChoice choose_plane(const topo::Topology& topology, const std::vector<NetDevice>& devices,
                         int requested_device, int peer_endpoint);

}  // namespace topocoll::plugin
