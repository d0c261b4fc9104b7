#include "net/nic_resolver.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "net/rdma_port.h"

namespace topocoll::net {

NicResolver::NicResolver(std::vector<std::pair<std::string, SocketAddress>> explicit_addresses,
                         std::vector<NetworkInterface> interfaces, std::filesystem::path sysfs_root)
    : explicit_(std::move(explicit_addresses)),
      interfaces_(std::move(interfaces)),
      sysfs_(std::move(sysfs_root)) {}

const NetworkInterface* NicResolver::interface_named(const std::string& name) const {
  auto it = std::find_if(interfaces_.begin(), interfaces_.end(),
                         [&](const NetworkInterface& i) { return i.name == name; });
  return it == interfaces_.end() ? nullptr : &*it;
}

std::vector<std::string> NicResolver::rdma_netdevs(const std::string& device, bool* device_exists) const {
  std::vector<std::string> names;
  std::error_code ec;
  *device_exists = std::filesystem::exists(sysfs_ / "class" / "infiniband" / device, ec) && !ec;
  if (!*device_exists) return names;
  for (const auto& entry : std::filesystem::directory_iterator(
           sysfs_ / "class" / "infiniband" / device / "device" / "net", ec))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

NicAddress NicResolver::resolve(const std::string& nic) const {
  NicAddress result;
  // A name with '/' or ".." would walk out of sysfs; it cannot be a device or interface.
  const bool plain_name = !nic.empty() && nic.find('/') == std::string::npos && nic != "." && nic != "..";

  auto mapped = std::find_if(explicit_.begin(), explicit_.end(), [&](const auto& e) { return e.first == nic; });
  if (mapped != explicit_.end()) {
    result.address = mapped->second;
    result.source = "TOPOCOLL_NET_PLANE_ADDRS";
    return result;
  }
  if (const NetworkInterface* i = interface_named(nic)) {
    result.address = i->address;
    result.interface_name = i->name;
    result.source = "interface " + i->name;
    return result;
  }

  std::string tried = "no TOPOCOLL_NET_PLANE_ADDRS entry";
  std::error_code ec;
  if (plain_name && std::filesystem::exists(sysfs_ / "class" / "net" / nic, ec))
    tried += ", interface " + nic + " exists but is down or has no IP address";
  else
    tried += ", no up interface named " + nic;

  bool is_rdma = false;
  std::vector<std::string> netdevs = plain_name ? rdma_netdevs(nic, &is_rdma) : std::vector<std::string>{};
  RdmaPortStatus port = plain_name ? query_rdma_port(nic) : RdmaPortStatus{};
  const std::string port_text = port.describe();
  result.port_down = port.down();

  if (is_rdma) {
    std::string listed;
    for (const std::string& name : netdevs) {
      listed += (listed.empty() ? "" : ", ") + name;
      const NetworkInterface* i = interface_named(name);
      if (!i || result.ok()) continue;
      result.address = i->address;
      result.interface_name = i->name;
    }
    if (result.ok()) {
      result.source = "RDMA device " + nic + " -> interface " + result.interface_name;
      if (!port_text.empty()) result.source += " (" + port_text + ")";
      return result;
    }
    tried += netdevs.empty()
                 ? ", RDMA device " + nic + " has no network interface under " +
                       (sysfs_ / "class" / "infiniband" / nic / "device" / "net").string()
                 : ", RDMA device " + nic + " has interface(s) " + listed +
                       " but none is up with an IP address";
  } else {
    tried += ", no RDMA device " + (sysfs_ / "class" / "infiniband" / nic).string();
  }
  if (!port_text.empty()) tried += "; libibverbs: " + port_text;
  if (result.port_down) tried += " (the port is not ACTIVE: check cabling and the switch port)";
  result.error = "NIC \"" + nic + "\" has no local IP address: " + tried;
  return result;
}

std::vector<std::pair<std::string, SocketAddress>> parse_plane_addresses(
    const std::string& text, std::vector<std::string>* errors) {
  std::vector<std::pair<std::string, SocketAddress>> result;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string entry = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (entry.empty()) continue;
    size_t eq = entry.find('=');
    std::optional<SocketAddress> address;
    if (eq != std::string::npos && eq > 0) address = SocketAddress::parse(entry.substr(eq + 1));
    if (!address) {
      if (errors) errors->push_back("entry \"" + entry + "\" is not NIC=IP (e.g. nic0=10.0.0.1)");
      continue;
    }
    const std::string nic = entry.substr(0, eq);
    // A NIC address must be one a peer can reach: not the wildcard, not a broadcast address.
    if (address->is_unspecified() || address->is_broadcast()) {
      if (errors)
        errors->push_back("entry \"" + entry + "\": " + address->ip_string() +
                          " is not an address a peer can reach (wildcard or broadcast); ignored");
      continue;
    }
    const bool nic_twice = std::any_of(result.begin(), result.end(), [&](const auto& r) { return r.first == nic; });
    const bool ip_twice = std::any_of(result.begin(), result.end(),
                                      [&](const auto& r) { return r.second.same_ip(*address); });
    if (nic_twice || ip_twice) {
      if (errors)
        errors->push_back("entry \"" + entry + "\": " +
                          (nic_twice ? "NIC " + nic + " is listed twice" : "address " + address->ip_string() + " is given to two NICs") +
                          "; the first entry is used");
      continue;
    }
    result.emplace_back(nic, *address);
  }
  return result;
}

}  // namespace topocoll::net
