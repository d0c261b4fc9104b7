#include "plugin/net/net_device.h"


#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "config/user_files.h"
#include "net/host_resolution.h"
#include "net/interface_list.h"
#include "net/nic_resolver.h"
#include "plugin/net/nccl_topology_names.h"
#include "plugin/log.h"

namespace topocoll::plugin {

namespace {

constexpr int kDefaultSpeedMbps = 10000;  // an interface that does not report its speed

std::string pci_path_of(const std::string& interface_name) {
  std::error_code ec;
  auto path = std::filesystem::canonical("/sys/class/net/" + interface_name + "/device", ec);
  if (ec || path.string().find("/pci") == std::string::npos) return {};
  return path.string();
}

std::vector<NetDevice> interface_devices(const config::Env& env) {
  // NCCL takes NCCL_SOCKET_IFNAME only when longer than one character (misc/socket.cc
  // ncclFindInterfaces); so does this plugin, to pick the interfaces NCCL would.
  const std::string& nccl_text = env.nccl_socket_ifname.size() > 1 ? env.nccl_socket_ifname : std::string();
  const std::string selector_text = !env.net_ifname.empty() ? env.net_ifname : nccl_text;
  // NCCL_COMM_ID (the bootstrap root's address), longer than one character as NCCL takes it.
  std::optional<net::SocketAddress> comm_id;
  if (env.nccl_comm_id.size() > 1) {
    net::SocketAddress address;
    if (const net::NetStatus s = net::resolve_host_port(env.nccl_comm_id, &address); s.ok())
      comm_id = address;
    else
      TC_WARN("NET: NCCL_COMM_ID %s; its subnet does not choose the interface (NCCL fails its socket "
              "transport's init on it)", s.message.c_str());
  }
  auto chosen = net::select_interfaces(net::list_interfaces(), net::InterfaceSelector(selector_text), comm_id);
  std::vector<NetDevice> devices;
  for (const auto& i : chosen) {
    NetDevice d;
    d.name = i.name;
    d.address = i.address;
    d.speed_mbps = i.speed_mbps > 0 ? i.speed_mbps : kDefaultSpeedMbps;
    d.pci_path = pci_path_of(i.name);
    devices.push_back(std::move(d));
  }
  if (devices.empty())
    TC_WARN("NET: no network interface matches \"%s\" (TOPOCOLL_NET_IFNAME / NCCL_SOCKET_IFNAME)",
            selector_text.c_str());
  return devices;
}

// One device per distinct NIC of this host's endpoints, addressed by TOPOCOLL_NET_PLANE_ADDRS,
// else by the interface of the same name, else by the interface of the RDMA device of that
// name (net/nic_resolver.h), else by the first usable interface.
std::vector<NetDevice> topology_devices(const config::Env& env, const topo::Topology& t, const topo::Host& host) {
  std::vector<std::string> errors;
  auto addresses = parse_plane_addresses(env.net_plane_addrs, &errors);
  for (const auto& e : errors) TC_WARN("NET: TOPOCOLL_NET_PLANE_ADDRS: %s", e.c_str());
  const net::NicResolver resolver(std::move(addresses), net::list_interfaces());
  std::vector<NetDevice> fallback;
  std::vector<NetDevice> devices;
  for (int e : host.endpoints) {
    const topo::Endpoint& ep = t.endpoints()[e];
    if (std::any_of(devices.begin(), devices.end(), [&](const NetDevice& d) { return d.name == ep.nic; }))
      continue;
    NetDevice d;
    d.name = ep.nic;
    d.endpoint = e;
    // Speed: the endpoint's links into the network (NAP nodes stripe over k local switches).
    double gbps = 0, latency = 0;
    for (int l : t.out_links({topo::NodeRef::Type::Endpoint, e})) {
      const topo::Link& link = t.links()[l];
      if (link.kind == topo::LinkKind::HostFabric) continue;
      gbps += link.gbps;
      latency = latency == 0 ? link.latency_us : std::min(latency, link.latency_us);
    }
    d.speed_mbps = int(std::min<double>(gbps * 1000.0, INT_MAX));
    d.latency_us = float(latency);
    net::NicAddress resolved = resolver.resolve(ep.nic);
    if (resolved.ok()) {
      d.address = resolved.address;
      if (!resolved.interface_name.empty()) d.pci_path = pci_path_of(resolved.interface_name);
      if (resolved.port_down)
        TC_WARN("NET: topology NIC %s resolves to %s through %s, but its port is not ACTIVE: "
                "connections through it will fail", ep.nic.c_str(), d.address.ip_string().c_str(),
                resolved.source.c_str());
      else
        TC_INFO(NCCL_INIT | NCCL_NET, "NET/topocoll: NIC %s is %s, from %s", ep.nic.c_str(),
                d.address.ip_string().c_str(), resolved.source.c_str());
    } else {
      if (fallback.empty()) fallback = interface_devices(env);
      if (fallback.empty()) {
        TC_WARN("NET: %s; no interface to fall back on, so host %s offers no device for it",
                resolved.error.c_str(), host.name.c_str());
        continue;
      }
      d.address = fallback.front().address;
      TC_WARN("NET: %s (host %s; set TOPOCOLL_NET_PLANE_ADDRS=%s=<ip>); "
              "using %s (%s), so its plane is not separated on the wire",
              resolved.error.c_str(), host.name.c_str(), ep.nic.c_str(), fallback.front().name.c_str(),
              fallback.front().address.ip_string().c_str());
    }
    devices.push_back(std::move(d));
  }
  return devices;
}

// Sets each device's nccl_name: its name, unless NCCL_TOPO_FILE has a <net> of that name.
void name_apart_from_nccl_topology(const config::Env& env, std::vector<NetDevice>* devices) {
  std::set<std::string> taken;
  if (!env.nccl_topo_file.empty()) {
    // A regular file of bounded size, opened non-blocking: a pipe would wait for a writer,
    // stalling NCCL's init (config/user_files.h).
    try {
      taken = net_names_in_nccl_topology(
          config::read_user_file(env.nccl_topo_file, std::uint64_t(64) << 20, "an NCCL topology file"));
    } catch (const config::UserFileError& e) {
      TC_INFO(NCCL_INIT | NCCL_NET, "NET/topocoll: NCCL_TOPO_FILE not read (%s); device names unchanged", e.what());
    }
  }
  std::vector<std::string> names;
  for (const NetDevice& d : *devices) names.push_back(d.name);
  const std::vector<std::string> told = names_apart_from(names, taken);
  for (size_t i = 0; i < devices->size(); ++i) {
    NetDevice& d = (*devices)[i];
    d.nccl_name = told[i];
    if (d.nccl_name != d.name)
      TC_WARN("NET: NCCL_TOPO_FILE %s describes a net named %s; NCCL would give this plugin's device of "
              "that name the file's attributes (gdr among them: GPU memory this TCP device cannot "
              "register), so NCCL knows it as %s",
              env.nccl_topo_file.c_str(), d.name.c_str(), d.nccl_name.c_str());
  }
}

}  // namespace

uint32_t handle_fingerprint(uint64_t topology_fingerprint) {
  const uint32_t folded = uint32_t(topology_fingerprint ^ (topology_fingerprint >> 32));
  return topology_fingerprint == 0 ? 0 : folded == 0 ? 1 : folded;
}

DeviceCatalog discover_devices(const ProcessContext& context) {
  DeviceCatalog catalog;
  const config::Env& env = context.env;
  catalog.host = context.host.name;
  if (!context.topology_error.empty()) {
    TC_WARN("NET: %s; using the host's interfaces, without plane routing", context.topology_error.c_str());
  } else if (context.topology && !context.host_index) {
    TC_WARN("NET: host \"%s\" (from %s) is not in topology %s (%s); set TOPOCOLL_HOSTNAME to its "
            "name there. Using the host's interfaces, without plane routing",
            context.host.name.c_str(), context.host.source, context.topology->name().c_str(),
            env.topo_file.c_str());
  } else if (context.topology) {
    catalog.devices = topology_devices(env, *context.topology, context.topology->hosts()[*context.host_index]);
    catalog.topology_fingerprint = handle_fingerprint(context.topology_fingerprint);
    catalog.topology = context.topology;
  }
  if (catalog.devices.empty()) {
    catalog.topology.reset();
    catalog.topology_fingerprint = 0;
    catalog.devices = interface_devices(env);
  }
  name_apart_from_nccl_topology(env, &catalog.devices);
  for (size_t i = 0; i < catalog.devices.size(); ++i) {
    const NetDevice& d = catalog.devices[i];
    TC_INFO(NCCL_INIT | NCCL_NET, "NET/topocoll: device %zu: %s %s, %d Mb/s, latency %.2f us%s%s", i,
            d.name.c_str(), d.address.ip_string().c_str(), d.speed_mbps, double(d.latency_us),
            d.endpoint >= 0 ? ", endpoint " : "",
            d.endpoint >= 0 ? catalog.topology->endpoints()[d.endpoint].id.c_str() : "");
  }
  return catalog;
}

}  // namespace topocoll::plugin
