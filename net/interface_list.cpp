#include "net/interface_list.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
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
}  // namespace

std::vector<NetworkInterface> list_interfaces() {
  std::vector<NetworkInterface> result;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return result;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
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
  return result;
}

std::vector<NetworkInterface> select_interfaces(const std::vector<NetworkInterface>& all,
                                                const InterfaceSelector& selector) {
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
  for (const char* tier : {"ib", "", "docker", "lo", "virbr"})
    if (auto chosen = pick(InterfaceSelector(tier)); !chosen.empty()) return chosen;
  return {};
}

}  // namespace topocoll::net
