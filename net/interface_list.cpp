#include "net/interface_list.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace topocoll::net {

InterfaceSelector::InterfaceSelector(std::string_view text) {
  if (!text.empty() && text.front() == '^') exclude_ = true, text.remove_prefix(1);
  if (!text.empty() && text.front() == '=') exact_ = true, text.remove_prefix(1);
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view name = text.substr(0, comma);
    if (!name.empty()) names_.emplace_back(name);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
}

bool InterfaceSelector::matches(std::string_view name) const {
  if (names_.empty()) return !name.starts_with("lo") && !name.starts_with("docker") && !name.starts_with("virbr");
  bool listed = std::any_of(names_.begin(), names_.end(), [&](const std::string& n) {
    return exact_ ? name == n : name.starts_with(n);
  });
  return exclude_ ? !listed : listed;
}

namespace {
int read_speed_mbps(const std::string& name) {
  std::ifstream in("/sys/class/net/" + name + "/speed");
  long long speed = 0;
  if (in >> speed && speed > 0) return int(speed);
  return 0;
}

bool is_link_local_v6(const SocketAddress& a) { return a.bytes[0] == 0xfe && (a.bytes[1] & 0xc0) == 0x80; }

// A netmask in the address's family, whatever family the mask itself carries.
SocketAddress mask_of(const sockaddr* mask, int family) {
  SocketAddress m;
  m.family = family;
  if (family == AF_INET) std::memcpy(m.bytes, &reinterpret_cast<const sockaddr_in*>(mask)->sin_addr, 4);
  else std::memcpy(m.bytes, &reinterpret_cast<const sockaddr_in6*>(mask)->sin6_addr, 16);
  return m;
}
}  // namespace

std::vector<NetworkInterface> list_interfaces() {
  std::vector<NetworkInterface> result;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return result;
  std::vector<std::pair<std::string, NetworkInterface::Subnet>> subnets;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_netmask && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      NetworkInterface::Subnet s{SocketAddress::from_sockaddr(i->ifa_addr), mask_of(i->ifa_netmask, i->ifa_addr->sa_family)};
      s.address.port = 0;
      subnets.emplace_back(i->ifa_name, s);
    }
    // Up and running (carrier), as NCCL requires (misc/socket.cc findInterfaces): an IPoIB
    // port with an address but no link must not become the default device.
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP) || !(i->ifa_flags & IFF_RUNNING)) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    SocketAddress address = SocketAddress::from_sockaddr(i->ifa_addr);
    address.port = 0;
    if (family == AF_INET6 && is_link_local_v6(address)) continue;
    auto existing = std::find_if(result.begin(), result.end(),
                                 [&](const NetworkInterface& n) { return n.name == i->ifa_name; });
    if (existing != result.end()) {
      // Prefer IPv4 when an interface has both.
      if (existing->address.family == AF_INET6 && family == AF_INET) existing->address = address;
      continue;
    }
    NetworkInterface n;
    n.name = i->ifa_name;
    n.address = address;
    n.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    n.speed_mbps = read_speed_mbps(n.name);
    result.push_back(std::move(n));
  }
  ::freeifaddrs(list);
  for (const auto& [name, s] : subnets)
    for (NetworkInterface& n : result)
      if (n.name == name) n.subnets.push_back(s);
  return result;
}

bool same_subnet(const SocketAddress& a, const SocketAddress& b, const SocketAddress& mask) {
  if (a.family != b.family || (a.family != AF_INET && a.family != AF_INET6)) return false;
  const int length = a.family == AF_INET ? 4 : 16;
  for (int k = 0; k < length; ++k)
    if ((a.bytes[k] & mask.bytes[k]) != (b.bytes[k] & mask.bytes[k])) return false;
  return a.family == AF_INET || a.scope_id == b.scope_id;
}

std::vector<NetworkInterface> select_interfaces(const std::vector<NetworkInterface>& all,
                                                const InterfaceSelector& selector,
                                                const std::optional<SocketAddress>& comm_id) {
  auto pick = [&all](const InterfaceSelector& s) {
    std::vector<NetworkInterface> chosen;
    for (const auto& n : all)
      if (s.matches(n.name)) chosen.push_back(n);
    return chosen;
  };
  if (!selector.is_default()) return pick(selector);
  // NCCL's own order (misc/socket.cc, ncclFindInterfaces): IPoIB first, then anything but
  // docker, loopback and libvirt bridges (virbr0 has the same address on every host), then
  // those as last resorts.
  if (auto ib = pick(InterfaceSelector("ib")); !ib.empty()) return ib;
  // NCCL_COMM_ID names the bootstrap root: the one interface with an address in its subnet
  // (ncclFindInterfaceMatchSubnet), with that address.
  if (comm_id)
    for (const auto& n : all)
      for (const auto& s : n.subnets)
        // Not a link-local IPv6 address: a handle carries no scope, so no peer could reach it.
        if (!(s.address.family == AF_INET6 && is_link_local_v6(s.address)) &&
            same_subnet(s.address, *comm_id, s.netmask)) {
          NetworkInterface chosen = n;
          chosen.address = s.address;
          return {chosen};
        }
  for (const char* tier : {"", "docker", "lo", "virbr"})
    if (auto chosen = pick(InterfaceSelector(tier)); !chosen.empty()) return chosen;
  return {};
}

}  // namespace topocoll::net
