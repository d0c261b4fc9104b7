// Maps a topology NIC name to the local IP address its sockets bind to. Topologies name NICs
// the way cluster engineers do, which is often the RDMA device ("mlx5_0") rather than the
// kernel interface carrying its IP ("ens1f0np0"). Tried in order:
//   1. an explicit entry (TOPOCOLL_NET_PLANE_ADDRS: nic=ip);
//   2. an interface of that name (getifaddrs);
//   3. an RDMA device of that name: its interfaces from
//      <sysfs>/class/infiniband/<nic>/device/net/*, the first one with an address.
// Otherwise the result carries an error naming the NIC and everything that was tried.
// With libibverbs (TOPOCOLL_ENABLE_IBVERBS) an RDMA name's port 1 state is reported too.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "net/interface_list.h"
#include "net/socket_address.h"

namespace topocoll::net {

struct NicAddress {
  SocketAddress address;       // unset when the NIC could not be resolved
  std::string interface_name;  // kernel interface the address belongs to; empty when explicit
  std::string source;          // how it was found, one phrase for an INFO line
  std::string error;           // why not: the NIC and what was tried
  bool port_down = false;      // an RDMA port libibverbs reports not ACTIVE
  bool ok() const { return address.is_set(); }
};

// TOPOCOLL_NET_PLANE_ADDRS: "nic0=127.0.0.2,nic1=127.0.0.3", the explicit entries (1.
// above), read alike by the net plugin and by acceptance's inventory. Bad entries (not
// NIC=IP, a wildcard or broadcast address, a NIC or an address given twice) are reported in
// *errors and left out.
std::vector<std::pair<std::string, SocketAddress>> parse_plane_addresses(const std::string& text,
                                                                        std::vector<std::string>* errors);

class NicResolver {
 public:
  // interfaces: normally list_interfaces(); sysfs_root: "/sys" except in tests.
  NicResolver(std::vector<std::pair<std::string, SocketAddress>> explicit_addresses,
              std::vector<NetworkInterface> interfaces,
              std::filesystem::path sysfs_root = "/sys");

  NicAddress resolve(const std::string& nic) const;

 private:
  const NetworkInterface* interface_named(const std::string& name) const;
  // Interface names under <sysfs>/class/infiniband/<device>/device/net, sorted; empty
  // when there is no such RDMA device.
  std::vector<std::string> rdma_netdevs(const std::string& device, bool* device_exists) const;

  std::vector<std::pair<std::string, SocketAddress>> explicit_;
  std::vector<NetworkInterface> interfaces_;
  std::filesystem::path sysfs_;
};

}  // namespace topocoll::net
