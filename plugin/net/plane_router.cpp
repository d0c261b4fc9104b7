#include "plugin/net/plane_router.h"

#include <tuple>

namespace topocoll::plugin {

namespace {

// Links of the topology's route between two endpoints; -1 when it has none.
int route_links(const topo::Topology& t, int from, int to) {
  try {
    auto paths = t.route(from, to);
    if (paths.empty()) return 0;
    size_t best = paths.front().links.size();
    for (const auto& p : paths) best = std::min(best, p.links.size());
    return int(best);
  } catch (const std::exception&) {
    return -1;
  }
}

std::string plane_of(const topo::Topology& t, int endpoint) {
  const topo::Endpoint& e = t.endpoints()[endpoint];
  if (e.attach_switch < 0) return t.kind() == topo::TopologyKind::Nap ? "package " + std::to_string(e.package) : "";
  const topo::Switch& s = t.switches()[e.attach_switch];
  return "switch " + s.id + ", " + std::string(topo::to_string(s.role)) + " group";
}

}  // namespace

PlaneChoice choose_plane(const topo::Topology& t, const std::vector<NetDevice>& devices,
                         int requested, int peer) {
  PlaneChoice choice;
  choice.device = requested;
  if (peer < 0 || peer >= int(t.endpoints().size()) || requested < 0 || requested >= int(devices.size())) {
    choice.why = "peer not in the topology; NCCL's device kept";
    return choice;
  }
  const topo::Endpoint& target = t.endpoints()[peer];
  const int own = devices[requested].endpoint;
  if (own >= 0 && t.endpoints()[own].host == target.host) {
    choice.why = "peer on the same host; NCCL's device kept";
    return choice;
  }
  // Fewest links, then NCCL's own choice, then the lowest device index.
  std::tuple<int, int, int> best{INT32_MAX, 1, INT32_MAX};
  for (int d = 0; d < int(devices.size()); ++d) {
    if (devices[d].endpoint < 0) continue;
    int links = route_links(t, devices[d].endpoint, peer);
    if (links < 0) continue;
    std::tuple<int, int, int> key{links, d == requested ? 0 : 1, d};
    if (key < best) {
      best = key;
      choice.device = d;
      choice.links = links;
    }
  }
  if (choice.links < 0) {
    choice.why = "no route in the topology; NCCL's device kept";
    return choice;
  }
  const NetDevice& chosen = devices[choice.device];
  choice.why = "route " + t.endpoints()[chosen.endpoint].id + " -> " + target.id + " (" +
               plane_of(t, peer) + ") takes " + std::to_string(choice.links) + " links from " +
               chosen.name + " (" + plane_of(t, chosen.endpoint) + ")";
  if (choice.device != requested && own >= 0)
    choice.why += ", " + std::to_string(route_links(t, own, peer)) + " from NCCL's choice " +
                  devices[requested].name;
  return choice;
}

}  // namespace topocoll::plugin
