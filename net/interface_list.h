// The host's network interfaces (getifaddrs) and NCCL_SOCKET_IFNAME-style selection:
// a comma-separated list of name prefixes; a leading '^' excludes the listed ones; a
// leading '=' (after '^' if both) makes the names exact instead of prefixes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/socket_address.h"

namespace topocoll::net {

struct NetworkInterface {
  std::string name;       // "eth0", "lo"
  SocketAddress address;  // its first IPv4 address, else its first global IPv6 one
  bool loopback = false;
  int speed_mbps = 0;     // /sys/class/net/<name>/speed, 0 when unknown
  // Every IPv4/IPv6 address of the interface with its netmask, in getifaddrs' order (for
  // NCCL's same-subnet choice; link-local IPv6 ones included, with their scope).
  struct Subnet {
    SocketAddress address, netmask;
  };
  std::vector<Subnet> subnets;
};

// Whether `a` and `b` are in the subnet `mask` draws (same family; IPv6 also the same scope),
// as NCCL's matchSubnet (misc/socket.cc) decides.
bool same_subnet(const SocketAddress& a, const SocketAddress& b, const SocketAddress& mask);

class InterfaceSelector {
 public:
  // Empty text = the default: every interface but lo*, docker* and virbr* (the middle tier
  // of select_interfaces' default order).
  explicit InterfaceSelector(std::string_view text);
  bool matches(std::string_view interface_name) const;
  bool is_default() const { return names_.empty(); }

 private:
  bool exclude_ = false;
  bool exact_ = false;
  std::vector<std::string> names_;
};

std::vector<NetworkInterface> list_interfaces();
// The interfaces the selector matches; for the default selector NCCL's order: ib* if any,
// else, given `comm_id` (NCCL_COMM_ID's address), the first interface with an address in
// its subnet (that address), else the default's, else docker*, else lo*, else virbr*.
std::vector<NetworkInterface> select_interfaces(const std::vector<NetworkInterface>& all,
                                                const InterfaceSelector& selector,
                                                const std::optional<SocketAddress>& comm_id = std::nullopt);

}  // namespace topocoll::net
