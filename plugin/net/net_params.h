// Environment of the net face (docs/net-plugin.md). The transport's own tuning
// (TOPOCOLL_NET_SOCKETS_PER_CONN, _THREADS, _TIMEOUT_MS, _CHUNK_BYTES) is read by
// net::TransportOptions::from_environment().
#pragma once

#include "plugin/param.h"

namespace topocoll::plugin {

// Topology JSON; devices and plane routing come from it when set.
TOPOCOLL_PARAM_STRING(net_topo_file, "TOPO_FILE", "")
// This host's name in the topology: config/local_host.h (TOPOCOLL_HOSTNAME, NCCL_HOSTID,
// gethostname()), the rule every face shares.
// Interface selection without a topology; overrides NCCL_SOCKET_IFNAME.
TOPOCOLL_PARAM_STRING(net_ifname, "NET_IFNAME", "")
// IP address of each topology NIC: "nic0=10.0.0.1,nic1=10.0.1.1".
TOPOCOLL_PARAM_STRING(net_plane_addrs, "NET_PLANE_ADDRS", "")

inline const std::string& nccl_socket_ifname() {
  static const std::string value = param_string("NCCL_SOCKET_IFNAME", "");
  return value;
}

}  // namespace topocoll::plugin
