// The fabric plan's routes are Topology::route: for every pair of endpoints on different
// hosts and every lane mark, a packet walked through the compiled rules and tables (as the
// kernel's policy routing would) crosses exactly the cables of the model's path.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <map>
#include <set>

#include "fabric/fabric_plan.h"
#include "fabric/route_compiler.h"
#include "fabric/route_walk.h"
#include "topo/cable_names.h"
#include "topo/generators.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::fabric {
namespace {

using topo::Topology;

using testing_support::example_topology;

std::vector<int> cables_of(const Topology& t, const topo::Path& p) {
  std::vector<int> out;
  for (int l : p.links)
    if (t.links()[l].kind != topo::LinkKind::HostFabric) out.push_back(l);
  return out;
}

// Every pair, every lane: the walk equals the model's path (lane j takes path j mod paths).
void expect_routes_match(const Topology& t, const FabricPlan& plan) {
  const int n = int(t.endpoints().size());
  const int lanes = std::max<int>(1, int(plan.lane_marks.size()));
  int checked = 0;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (t.endpoints()[a].host_index == t.endpoints()[b].host_index) continue;
      const auto paths = t.route(a, b);
      for (int j = 0; j < lanes; ++j) {
        const uint32_t mark = plan.lane_marks.empty() ? 0 : plan.lane_marks[j];
        const WalkResult w = walk_route(plan, a, b, mark);
        ASSERT_EQ(w.links, cables_of(t, paths[j % paths.size()]))
            << t.name() << " " << t.endpoints()[a].id << " -> " << t.endpoints()[b].id << " lane " << j;
        EXPECT_FALSE(w.multipath && paths.size() == 1);
        ++checked;
      }
      // Without a mark (ping, ssh): the first cable is one of the paths' first cables, and
      // the route is multipath exactly where the flow stripes.
      const WalkResult plain = walk_route(plan, a, b, 0);
      std::set<int> firsts;
      for (const auto& p : paths) firsts.insert(cables_of(t, p).front());
      EXPECT_TRUE(firsts.count(plain.links.front()));
      EXPECT_EQ(plain.multipath, firsts.size() > 1) << t.endpoints()[a].id << " -> " << t.endpoints()[b].id;
    }
  EXPECT_GT(checked, 0);
}

TEST(FabricPlan, BiGraph32RoutesAreTheModels) {
  const Topology t = example_topology("bigraph-32.json");
  const FabricPlan plan = plan_fabric(t, {});
  EXPECT_EQ(plan.namespaces.size(), 1u + 32 + 8);
  EXPECT_EQ(plan.cables.size(), 32u + 16);
  EXPECT_TRUE(plan.lane_marks.empty());
  EXPECT_TRUE(plan.notes.empty());
  expect_routes_match(t, plan);
  // No exceptions: BiGraph routes are destination-based at every switch.
  for (const auto& ns : plan.namespaces)
    for (const auto& r : ns.rules) EXPECT_GE(r.priority, kStripeRulePriority) << ns.name;
}

TEST(FabricPlan, Nap4x8StripesOverTheLocalSwitches) {
  const Topology t = example_topology("nap-4x8.json");
  const FabricPlan plan = plan_fabric(t, {});
  EXPECT_EQ(plan.lane_marks.size(), size_t(t.local_switches()));
  EXPECT_EQ(plan.namespaces.size(), 1u + 32 + 16);
  expect_routes_match(t, plan);
}

TEST(FabricPlan, MultiGpuHostsKeepTheirHostFabric) {
  topo::BiGraphShape b;
  b.switches_per_group = 2;
  b.endpoints_per_switch = 4;
  b.gpus_per_server = 4;
  const Topology big = topo::generate_bigraph(b);
  const FabricPlan bp = plan_fabric(big, {});
  EXPECT_EQ(bp.namespaces.size(), 1 + big.hosts().size() + 4);
  expect_routes_match(big, bp);

  topo::NapShape n;
  n.packages = 4;
  n.nodes_per_package = 4;
  n.local_switches = 2;
  n.torus = {2, 2};
  n.gpus_per_host = 2;
  const Topology nap = topo::generate_nap(n);
  const FabricPlan np = plan_fabric(nap, {});
  expect_routes_match(nap, np);
}

TEST(FabricPlan, LargerTorusAndMissingCables) {
  topo::NapShape n;
  n.packages = 6;
  n.nodes_per_package = 2;
  n.local_switches = 3;
  n.torus = {3, 2};
  const Topology nap = topo::generate_nap(n);
  expect_routes_match(nap, plan_fabric(nap, {}));

  // An explicit inter-group list with cables left out: routes detour (next middle, or a
  // longer switch path), and the tables still follow them exactly.
  auto doc = topo::topology_to_json(example_topology("bigraph-32.json"));
  nlohmann::json links = nlohmann::json::array();
  for (const char* u : {"U0", "U1", "U2", "U3"})
    for (const char* l : {"L0", "L1", "L2", "L3"})
      if (!(std::string(u) == "U0" && std::string(l) == "L1") &&
          !(std::string(u) == "U2" && std::string(l) == "L0") &&
          !(std::string(u) == "U3" && std::string(l) == "L3"))
        links.push_back({u, l});
  doc["links"] = links;
  const Topology gaps = topo::topology_from_json(doc);
  expect_routes_match(gaps, plan_fabric(gaps, {}));
}

// A few lines of topology describe a million cables (a complete bipartite core of many
// switches): refused, naming the count, before anything is planned.
TEST(FabricPlan, TooManyCablesOrEndpointsAreRefusedUpFront) {
  topo::BiGraphShape wide;
  wide.switches_per_group = 200;  // 40000 core cables, 400 endpoints
  wide.endpoints_per_switch = 1;
  const Topology t = topo::generate_bigraph(wide);
  try {
    check_fabric_limits(t);
    ADD_FAILURE() << "40400 cables accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has 40400 cables; a fabric emulates at most 32768"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(plan_fabric(t, {}), std::invalid_argument);
  topo::BiGraphShape many;
  many.switches_per_group = 40;
  many.endpoints_per_switch = 16;  // 1280 endpoints
  try {
    check_fabric_limits(topo::generate_bigraph(many));
    ADD_FAILURE() << "1280 endpoints accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("has 1280 endpoints; a fabric emulates at most 1024"), std::string::npos)
        << e.what();
  }
  many.endpoints_per_switch = 12;  // 960 endpoints, 1600 core cables: within
  EXPECT_NO_THROW(check_fabric_limits(topo::generate_bigraph(many)));
}

// Each class of rules is looked up before the next however long it is: 500 exception rules
// (a node forwarding for hundreds of sources) push the stripes, not into them.
TEST(FabricPlan, RuleClassesKeepTheirOrderWhateverTheirLength) {
  Namespace ns;
  ns.name = "tf-tf-x";
  const auto rule = [](int numbered) {
    Rule r;
    r.priority = numbered;
    return r;
  };
  for (int i = 0; i < 500; ++i) ns.rules.push_back(rule(0 * kRuleClassSpan + i));
  for (int i = 0; i < 2; ++i) ns.rules.push_back(rule(1 * kRuleClassSpan + i));
  ns.rules.push_back(rule(2 * kRuleClassSpan));
  for (int i = 0; i < 4; ++i) ns.rules.push_back(rule(3 * kRuleClassSpan + i));
  place_rule_classes(ns);
  EXPECT_EQ(ns.rules[0].priority, kExceptionRulePriority);
  EXPECT_EQ(ns.rules[499].priority, kExceptionRulePriority + 499);
  EXPECT_EQ(ns.rules[500].priority, kExceptionRulePriority + 500) << "stripes right after the exceptions";
  EXPECT_EQ(ns.rules[501].priority, kExceptionRulePriority + 501);
  EXPECT_EQ(ns.rules[502].priority, kOriginRulePriority);
  EXPECT_EQ(ns.rules[503].priority, kTransitRulePriority);
  EXPECT_EQ(ns.rules[506].priority, kTransitRulePriority + 3);
  Namespace huge;
  huge.name = "tf-tf-y";
  for (int i = 0; i < 33000; ++i) huge.rules.push_back(rule(i));
  try {
    place_rule_classes(huge);
    ADD_FAILURE() << "rules past the main table's accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("namespace tf-tf-y needs 33000 routing rules, more than fit before the "
                                         "main table's (priority 32766)"),
              std::string::npos)
        << e.what();
  }
}

TEST(FabricPlan, RatesScaleFromTheFastestCable) {
  const Topology t = example_topology("nap-4x8.json");  // 512 Gb/s inside packages, 256 on the torus
  FabricOptions o;
  o.rate_mbit = 40;
  const FabricPlan plan = plan_fabric(t, o);
  std::set<double> rates;
  for (const auto& c : plan.cables) rates.insert(c.mbit_ab);
  EXPECT_EQ(rates, (std::set<double>{20, 40}));
  const Topology emulated = emulated_topology(t, plan);
  EXPECT_DOUBLE_EQ(emulated.links()[plan.cables[0].link].gbps * 1000, plan.cables[0].mbit_ab);
  o.rate_mbit = 0;
  o.scale = 1e-4;
  EXPECT_DOUBLE_EQ(plan_fabric(t, o).cables[0].mbit_ab, 512 * 1000 * 1e-4);
  // --scale bounds the fastest cable as --rate-mbit does: no rate tbf cannot hold.
  o.scale = 1;
  try {
    plan_fabric(t, o);
    ADD_FAILURE() << "a 512000 Mbit/s cable was planned";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("above the 10000 Mbit/s"), std::string::npos) << e.what();
  }
}

TEST(FabricPlan, NamesAndOptionsAreChecked) {
  const Topology t = example_topology("bigraph-32.json");
  const FabricPlan plan = plan_fabric(t, {});
  std::set<std::string> names;
  for (const auto& ns : plan.namespaces) {
    EXPECT_EQ(ns.name.rfind("tf-tf-", 0), 0u) << ns.name;
    EXPECT_TRUE(names.insert(ns.name).second) << ns.name;
    for (const auto& i : ns.interfaces) EXPECT_LE(i.size(), 15u) << i;
  }
  EXPECT_EQ(plan.endpoints[0].interface, "nic0");
  EXPECT_EQ(plan.endpoints[0].address, "10.1.0.1");
  for (auto bad : {FabricOptions{.name = "a-b"}, FabricOptions{.name = ""},
                   FabricOptions{.name = "waytoolongname"}, FabricOptions{.rate_mbit = -1},
                   FabricOptions{.rate_mbit = 10, .scale = 0.1}, FabricOptions{.scale = 2},
                   FabricOptions{.mtu = 100}, FabricOptions{.peak_slack_us = -1},
                   FabricOptions{.peak_slack_us = 20000},
                   FabricOptions{.peak_slack_us = std::numeric_limits<double>::quiet_NaN()}})
    EXPECT_THROW(plan_fabric(t, bad), std::invalid_argument);
}

TEST(FabricPlan, SizeEstimateGrowsWithTheTopology) {
  const auto small = estimate_fabric_size(example_topology("bigraph-32.json"));
  const auto large = estimate_fabric_size(example_topology("nap-16x8.json"));
  EXPECT_EQ(small.namespaces, 41);
  EXPECT_GT(large.memory_mib, small.memory_mib);
}

}  // namespace
}  // namespace topocoll::fabric

namespace topocoll::fabric {
namespace {

// Every address on a namespace's lo carries a label of its own: a NIC whose "lo-<nic>" does
// not fit falls back to "lo-e<endpoint>", which may be another NIC's own label already; two
// addresses of one label would let NCCL_SOCKET_IFNAME pick the wrong endpoint's.
TEST(FabricPlan, AddressLabelsOnLoAreUniquePerNamespace) {
  std::ifstream in(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/nap-4x8.json");
  nlohmann::json doc = nlohmann::json::parse(in);
  // Nodes 0 and 1 on one host: node 0's NIC named "e1", node 1's too long for "lo-<nic>".
  doc["nodes"][1]["host"] = doc["nodes"][0]["host"];
  doc["nodes"][1]["gpu"] = 1;
  doc["nodes"][0]["nic"] = "e1";
  doc["nodes"][1]["nic"] = "averyverylongnicname";
  const topo::Topology t = topo::topology_from_json(doc);
  FabricOptions o;
  o.name = "lb";
  const FabricPlan plan = plan_fabric(t, o);
  std::map<int, std::set<std::string>> labels;
  int labelled = 0;
  for (const FabricEndpoint& e : plan.endpoints) {
    if (e.address_label.empty()) continue;
    ++labelled;
    EXPECT_TRUE(labels[e.ns].insert(e.address_label).second) << "label " << e.address_label << " twice";
    EXPECT_LE(e.address_label.size(), 15u) << e.address_label;
  }
  EXPECT_GT(labelled, 1);
}

}  // namespace
}  // namespace topocoll::fabric
