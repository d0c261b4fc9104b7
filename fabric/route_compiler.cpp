#include "fabric/route_compiler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

namespace topocoll::fabric {
namespace {

constexpr int kClassStart[] = {kExceptionRulePriority, kStripeRulePriority, kOriginRulePriority,
                               kTransitRulePriority};
// The kernel's main table is looked up at 32766 (`ip rule` lists it): every rule goes before.
constexpr int kMainRulePriority = 32766;

}  // namespace

void place_rule_classes(Namespace& ns) {
  int end = 0;  // one past the last priority given so far
  for (int c = 0; c < 4; ++c) {
    const int start = std::max(kClassStart[c], end);
    for (Rule& r : ns.rules)
      if (r.priority / kRuleClassSpan == c) {
        r.priority = start + r.priority % kRuleClassSpan;
        end = std::max(end, r.priority + 1);
      }
    end = std::max(end, start);
  }
  if (end > kMainRulePriority)
    throw std::invalid_argument("namespace " + ns.name + " needs " + std::to_string(ns.rules.size()) +
                                " routing rules, more than fit before the main table's (priority " +
                                std::to_string(kMainRulePriority) + ")");
}

namespace {

using topo::LinkKind;
using topo::NodeRef;
using topo::Topology;

// One flow's choice at one place: which cable it leaves by.
struct Decision {
  int source = -1;  // endpoint the flow starts at
  int path = 0;     // which of its paths
  int paths = 1;
  double fraction = 1;
  int link = -1;
};

// Next-hop sets, as the key of a route: sorted (link, weight) pairs.
using HopSet = std::vector<std::pair<int, int>>;

class TableBuilder {
 public:
  TableBuilder(const Topology& t, const NodeAddressing& a) : t_(t), a_(a) {}

  Route route(const std::string& destination, const HopSet& hops, const std::string& source) const {
    Route r;
    r.destination = destination;
    r.source = source;
    for (const auto& [link, weight] : hops) {
      const auto& l = t_.links()[link];
      r.hops.push_back({a_.address_of_node[t_.graph_node(l.to)], a_.device_of_link[link], weight});
    }
    return r;
  }

  // Every destination listed; the most common next-hop set becomes the default route.
  RouteTable full(int id, std::string purpose, const std::map<int, HopSet>& by_destination,
                  const std::string& source) const {
    RouteTable table{id, std::move(purpose), {}};
    std::map<HopSet, int> count;
    for (const auto& [dst, hops] : by_destination) ++count[hops];
    const HopSet* common = nullptr;
    int best = 0;
    for (const auto& [hops, n] : count)
      if (n > best) best = n, common = &hops;
    if (common) table.routes.push_back(route("default", *common, source));
    for (const auto& [dst, hops] : by_destination)
      if (hops != *common) table.routes.push_back(route(endpoint_prefix(dst), hops, source));
    return table;
  }

  // Only the destinations listed: lookups for any other fall through to the next rule.
  RouteTable partial(int id, std::string purpose, const std::map<int, HopSet>& by_destination) const {
    RouteTable table{id, std::move(purpose), {}};
    for (const auto& [dst, hops] : by_destination)
      table.routes.push_back(route(endpoint_prefix(dst), hops, ""));
    return table;
  }

  std::string endpoint_prefix(int endpoint) const {
    return a_.address_of_node[t_.graph_node({NodeRef::Type::Endpoint, endpoint})] + "/32";
  }

 private:
  const Topology& t_;
  const NodeAddressing& a_;
};

HopSet weighted(const std::map<int, double>& fraction_by_link) {
  HopSet hops;
  for (const auto& [link, fraction] : fraction_by_link)
    hops.push_back({link, std::max(1, int(std::lround(fraction * 100)))});
  return hops;
}

}  // namespace

void compile_routes(const Topology& t, const NodeAddressing& a, FabricPlan& plan) {
  const int endpoints = int(t.endpoints().size());
  // (context node, destination) -> decisions. The context is where the packet is: its origin
  // endpoint, or the node whose cable it came in by (crossing a host fabric does not change
  // it: that happens inside one namespace).
  std::map<std::pair<int, int>, std::vector<Decision>> decisions;
  int max_paths = 1;
  for (int src = 0; src < endpoints; ++src)
    for (int dst = 0; dst < endpoints; ++dst) {
      if (t.endpoints()[src].host_index == t.endpoints()[dst].host_index) continue;
      const auto paths = t.route(src, dst);
      for (int j = 0; j < int(paths.size()); ++j) {
        int context = t.graph_node({NodeRef::Type::Endpoint, src});
        for (int link : paths[j].links) {
          const auto& l = t.links()[link];
          if (l.kind == LinkKind::HostFabric) continue;
          decisions[{context, dst}].push_back(
              {src, j, int(paths.size()), paths[j].fraction, link});
          context = t.graph_node(l.to);
        }
      }
      max_paths = std::max(max_paths, int(paths.size()));
    }

  TableBuilder build(t, a);
  // Per namespace: next table id and next rule priority per class.
  std::vector<int> next_table(plan.namespaces.size(), 1000);
  // Numbered within their class while compiling (class c from c * kRuleClassSpan), given their
  // final priorities by place_rule_classes once every class is counted.
  std::vector<int> next_exception(plan.namespaces.size(), 0 * kRuleClassSpan);
  std::vector<int> next_stripe(plan.namespaces.size(), 1 * kRuleClassSpan);
  std::vector<int> next_origin(plan.namespaces.size(), 2 * kRuleClassSpan);
  std::vector<int> next_transit(plan.namespaces.size(), 3 * kRuleClassSpan);
  std::vector<bool> main_set(plan.namespaces.size(), false);
  std::set<std::string> notes;

  // Interfaces of each graph node (its cables' devices on its side).
  std::vector<std::vector<std::string>> devices_of_node(t.graph_node_count());
  for (const auto& l : t.links())
    if (l.kind != LinkKind::HostFabric)
      devices_of_node[t.graph_node(l.from)].push_back(a.device_of_link[l.id]);

  // Group decisions by context node.
  std::map<int, std::vector<std::pair<int, const std::vector<Decision>*>>> by_context;
  for (const auto& [key, list] : decisions) by_context[key.first].push_back({key.second, &list});

  for (int node = 0; node < t.graph_node_count(); ++node) {
    const auto found = by_context.find(node);
    if (found == by_context.end()) continue;
    const NodeRef ref = t.node_ref(node);
    const int nsi = a.ns_of_node[node];
    Namespace& ns = plan.namespaces[nsi];
    const std::string self = t.node_id(ref);
    const bool is_endpoint = ref.type == NodeRef::Type::Endpoint;
    const std::string own_address = a.address_of_node[node];

    std::map<int, HopSet> origin;                       // destination -> hops
    std::vector<std::map<int, HopSet>> stripe(max_paths);  // per path index
    bool stripes = false;
    std::map<int, HopSet> transit;                      // majority choice per destination
    std::map<int, std::map<int, HopSet>> exceptions;    // source -> destination -> hops

    for (const auto& [dst, list] : found->second) {
      std::map<int, double> own_links;              // origin: link -> fraction
      std::map<int, int> path_link;                 // origin: path -> link
      std::map<int, std::map<int, double>> others;  // transit: source -> link -> fraction
      for (const Decision& d : *list) {
        if (is_endpoint && d.source == ref.index) {
          own_links[d.link] += d.fraction;
          path_link[d.path] = d.link;
        } else {
          others[d.source][d.link] += d.fraction;
        }
      }
      if (!own_links.empty()) {
        origin[dst] = weighted(own_links);
        if (own_links.size() > 1) stripes = true;
        for (int j = 0; j < max_paths; ++j) {
          // A flow with fewer paths than lanes: lane j takes path j mod paths.
          const int path = j % int(path_link.size());
          stripe[j][dst] = HopSet{{std::next(path_link.begin(), path)->second, 1}};
        }
      }
      if (others.empty()) continue;
      std::map<HopSet, int> votes;
      for (const auto& [source, links] : others) ++votes[weighted(links)];
      const HopSet majority =
          std::max_element(votes.begin(), votes.end(),
                           [](const auto& x, const auto& y) { return x.second < y.second; })
              ->first;
      transit[dst] = majority;
      for (const auto& [source, links] : others) {
        const HopSet hops = weighted(links);
        if (hops.size() > 1)
          notes.insert("forwarded flows from " + t.endpoints()[source].id + " split at " + self +
                       ": the kernel spreads them by hashing, not by the model's fractions");
        if (hops != majority) exceptions[source][dst] = hops;
      }
    }

    auto add_table = [&](RouteTable table) {
      const int id = table.id;
      ns.tables.push_back(std::move(table));
      return id;
    };
    const auto devices = devices_of_node[node];

    if (ns.role == NamespaceRole::Switch) {
      // A switch only forwards: its main table is its transit table.
      RouteTable main = build.full(kMainTable, "transit " + self, transit, "");
      main.purpose = "transit " + self;
      add_table(std::move(main));
      main_set[nsi] = true;
    } else {
      if (!origin.empty()) {
        const int id = add_table(build.full(next_table[nsi]++, "origin " + self, origin, own_address));
        ns.rules.push_back({next_origin[nsi]++, own_address + "/32", "", 0, id});
        if (!main_set[nsi]) {
          RouteTable main = build.full(kMainTable, "origin " + self + " (unbound sockets)", origin,
                                       own_address);
          add_table(std::move(main));
          main_set[nsi] = true;
        }
        if (stripes)
          for (int j = 0; j < max_paths; ++j) {
            const int sid = add_table(build.full(next_table[nsi]++,
                                                 "stripe " + std::to_string(j) + " of " + self,
                                                 stripe[j], own_address));
            ns.rules.push_back({next_stripe[nsi]++, own_address + "/32", "",
                                kFirstLaneMark + uint32_t(j), sid});
          }
      }
      if (!transit.empty()) {
        const int id = add_table(build.partial(next_table[nsi]++, "transit " + self, transit));
        for (const auto& dev : devices) ns.rules.push_back({next_transit[nsi]++, "", dev, 0, id});
      }
    }
    for (const auto& [source, routes] : exceptions) {
      const std::string from =
          a.address_of_node[t.graph_node({NodeRef::Type::Endpoint, source})] + "/32";
      const int id = add_table(build.partial(
          next_table[nsi]++, "flows from " + t.endpoints()[source].id + " through " + self, routes));
      if (ns.role == NamespaceRole::Switch) {
        ns.rules.push_back({next_exception[nsi]++, from, "", 0, id});
      } else {
        for (const auto& dev : devices) ns.rules.push_back({next_exception[nsi]++, from, dev, 0, id});
      }
    }
    if (stripes && int(plan.lane_marks.size()) < max_paths) {
      plan.lane_marks.clear();
      for (int j = 0; j < max_paths; ++j) plan.lane_marks.push_back(kFirstLaneMark + uint32_t(j));
    }
  }
  for (Namespace& ns : plan.namespaces) place_rule_classes(ns);
  plan.notes.assign(notes.begin(), notes.end());
}

}  // namespace topocoll::fabric
