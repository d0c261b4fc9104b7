#include "fabric/route_walk.h"

#include <algorithm>
#include <stdexcept>

namespace topocoll::fabric {
namespace {


const Route* lookup(const RouteTable& table, const std::string& destination) {
  const Route* fallback = nullptr;
  for (const auto& r : table.routes) {
    if (r.destination == "default") fallback = &r;
    else if (address_without_prefix(r.destination) == destination) return &r;
  }
  return fallback;
}

const RouteTable* find_table(const Namespace& ns, int id) {
  for (const auto& t : ns.tables)
    if (t.id == id) return &t;
  return nullptr;
}

}  // namespace

WalkResult walk_route(const FabricPlan& plan, int from, int to, uint32_t mark) {
  const FabricEndpoint& src = plan.endpoints.at(from);
  const FabricEndpoint& dst = plan.endpoints.at(to);
  WalkResult result;
  int nsi = src.ns;
  std::string iif = "lo";
  for (int hops = 0; hops < 64; ++hops) {
    const Namespace& ns = plan.namespaces[nsi];
    for (const auto& [dev, address] : ns.addresses)
      if (address_without_prefix(address) == dst.address) return result;
    std::vector<const Rule*> rules;
    for (const auto& r : ns.rules) rules.push_back(&r);
    std::stable_sort(rules.begin(), rules.end(),
                     [](const Rule* a, const Rule* b) { return a->priority < b->priority; });
    const Route* route = nullptr;
    for (const Rule* r : rules) {
      if (!r->from.empty() && address_without_prefix(r->from) != src.address) continue;
      if (!r->iif.empty() && r->iif != iif) continue;
      if (r->fwmark != 0 && r->fwmark != mark) continue;
      if (const RouteTable* t = find_table(ns, r->table))
        if ((route = lookup(*t, dst.address))) break;
    }
    if (!route)
      if (const RouteTable* main = find_table(ns, kMainTable)) route = lookup(*main, dst.address);
    if (!route || route->hops.empty())
      throw std::runtime_error("no route to " + dst.id + " in " + ns.name);
    result.multipath = result.multipath || route->hops.size() > 1;
    const std::string& device = route->hops.front().device;
    bool moved = false;
    for (const auto& c : plan.cables) {
      if (c.a.ns == nsi && c.a.interface == device) {
        result.links.push_back(c.link);
        nsi = c.b.ns;
        iif = c.b.interface;
      } else if (c.b.ns == nsi && c.b.interface == device) {
        result.links.push_back(c.reverse);
        nsi = c.a.ns;
        iif = c.a.interface;
      } else {
        continue;
      }
      moved = true;
      break;
    }
    if (!moved) throw std::runtime_error("interface " + device + " of " + ns.name + " is no cable");
    mark = 0;  // cleared when a packet crosses into another namespace
  }
  throw std::runtime_error("routing loop from " + src.id + " to " + dst.id);
}

}  // namespace topocoll::fabric
