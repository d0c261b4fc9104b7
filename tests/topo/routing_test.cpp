// Routing properties of generated BiGraph and NAP topologies (docs/topology.md, "Routing").
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "topo/generators.h"
#include "topo/topology.h"
#include "topo/topology_error.h"

namespace topocoll::topo {
namespace {

int count_kind(const Topology& t, const Path& p, LinkKind kind) {
  int n = 0;
  for (int l : p.links) n += t.links()[l].kind == kind;
  return n;
}

// A path is a chain from the source endpoint to the destination endpoint.
void expect_chain(const Topology& t, const Path& p, int from, int to) {
  ASSERT_FALSE(p.links.empty());
  NodeRef at{NodeRef::Type::Endpoint, from};
  for (int l : p.links) {
    EXPECT_EQ(t.links()[l].from, at) << t.node_id(at);
    at = t.links()[l].to;
  }
  EXPECT_EQ(at, (NodeRef{NodeRef::Type::Endpoint, to}));
}

TEST(TopoBiGraphRouting, DefaultShapeCounts) {
  Topology t = generate_bigraph({});
  EXPECT_EQ(t.kind(), TopologyKind::BiGraph);
  EXPECT_EQ(t.endpoints().size(), 32u);
  EXPECT_EQ(t.switches().size(), 8u);
  EXPECT_EQ(t.hosts().size(), 32u);
  EXPECT_EQ(t.switches_per_group(), 4);
  int inter = 0;
  for (const auto& l : t.links()) inter += l.kind == LinkKind::InterGroup;
  EXPECT_EQ(inter, 2 * 16);  // 16 cables, two directions each
  EXPECT_EQ(t.diameter_hops(), 3);
  EXPECT_EQ(t.find_switch("L3"), 7);
  EXPECT_EQ(t.find_endpoint("s5", 0), 5);
  EXPECT_EQ(t.find_endpoint_by_id("s5.g0"), 5);
  EXPECT_FALSE(t.find_endpoint("s5", 1));
}

// gethostname() may or may not carry the domain; the file may or may not spell it.
TEST(TopoHosts, FoundWithOrWithoutTheDomain) {
  Topology t = generate_bigraph({});
  EXPECT_EQ(t.find_host("s5"), 5);
  EXPECT_EQ(t.find_host("s5.cluster.example"), 5);
  EXPECT_EQ(t.find_endpoint("s5.cluster.example", 0), 5);
  EXPECT_FALSE(t.find_host("s55"));
  EXPECT_FALSE(t.find_host("vm"));
  EXPECT_FALSE(t.find_host(""));
  // Ignoring case, as DNS does: the machine Node5's file may say node5 (the loader refuses
  // two hosts that differ only in case, so this finds one).
  EXPECT_EQ(t.find_host("S5"), 5);
  EXPECT_EQ(t.find_host("S5.Cluster.Example"), 5);
}

TEST(TopoBiGraphRouting, EveryPairFollowsTheRules) {
  Topology t = generate_bigraph({});
  std::map<int, std::set<int>> middles_from_switch;  // same-group middles per source switch
  for (int a = 0; a < 32; ++a)
    for (int b = 0; b < 32; ++b) {
      auto paths = t.route(a, b);
      if (a == b) {
        EXPECT_TRUE(paths.empty());
        continue;
      }
      ASSERT_EQ(paths.size(), 1u);
      const Path& p = paths[0];
      EXPECT_DOUBLE_EQ(p.fraction, 1.0);
      expect_chain(t, p, a, b);
      const Switch& s = t.switches()[t.endpoints()[a].attach_switch];
      const Switch& d = t.switches()[t.endpoints()[b].attach_switch];
      EXPECT_EQ(count_kind(t, p, LinkKind::Access), 2);
      if (&s == &d) {
        EXPECT_EQ(p.links.size(), 2u);
      } else if (s.role != d.role) {
        EXPECT_EQ(p.links.size(), 3u);
        EXPECT_EQ(count_kind(t, p, LinkKind::InterGroup), 1);
      } else {
        EXPECT_EQ(p.links.size(), 4u);
        EXPECT_EQ(count_kind(t, p, LinkKind::InterGroup), 2);
        const Link& up = t.links()[p.links[1]];
        const Switch& middle = t.switches()[up.to.index];
        EXPECT_NE(middle.role, s.role);
        EXPECT_EQ(middle.index_in_role, (s.index_in_role + d.index_in_role) % 4);
        middles_from_switch[s.index_in_role * 2 + int(s.role)].insert(middle.index_in_role);
      }
    }
  // From one switch, its three group-mates are reached through three distinct middles.
  for (const auto& [sw, middles] : middles_from_switch) EXPECT_EQ(middles.size(), 3u) << sw;
}

TEST(TopoBiGraphRouting, CrossGroupPathIsTheOnlyOneHopPath) {
  Topology t = generate_bigraph({});
  // Uniqueness: the inter-group link used is the only cable between the two switches.
  for (int a = 0; a < 32; ++a)
    for (int b = 0; b < 32; ++b) {
      int s = t.endpoints()[a].attach_switch, d = t.endpoints()[b].attach_switch;
      if (t.switches()[s].role == t.switches()[d].role) continue;
      int cables = 0;
      for (const auto& l : t.links())
        cables += l.from == NodeRef{NodeRef::Type::Switch, s} &&
                  l.to == NodeRef{NodeRef::Type::Switch, d};
      EXPECT_EQ(cables, 1);
    }
}

TEST(TopoBiGraphRouting, SameHostUsesHostFabric) {
  BiGraphShape shape;
  shape.gpus_per_server = 8;
  Topology t = generate_bigraph(shape);
  EXPECT_EQ(t.hosts().size(), 4u);
  const Host& h = t.hosts()[0];
  ASSERT_GE(h.fabric_switch, 0);
  EXPECT_EQ(t.switches()[h.fabric_switch].id, "s0.fabric");
  auto paths = t.route(h.endpoints[0], h.endpoints[5]);
  ASSERT_EQ(paths.size(), 1u);
  ASSERT_EQ(paths[0].links.size(), 2u);
  EXPECT_EQ(count_kind(t, paths[0], LinkKind::HostFabric), 2);
  expect_chain(t, paths[0], h.endpoints[0], h.endpoints[5]);
  // Alternate spread: NIC i of a server is in group i % 2.
  for (int e : h.endpoints) {
    const Endpoint& ep = t.endpoints()[e];
    EXPECT_EQ(t.switches()[ep.attach_switch].role,
              ep.gpu % 2 == 0 ? SwitchRole::Upper : SwitchRole::Lower);
  }
  EXPECT_EQ(t.diameter_hops(), 3);
}

TEST(TopoNapRouting, SamePackageStripesOverLocalSwitches) {
  Topology t = generate_nap({});
  EXPECT_EQ(t.endpoints().size(), 32u);
  EXPECT_EQ(t.switches().size(), 16u);
  EXPECT_EQ(t.package_count(), 4);
  auto paths = t.route(0, 3);
  ASSERT_EQ(paths.size(), 4u);
  double total = 0;
  std::set<int> used;
  for (const auto& p : paths) {
    total += p.fraction;
    expect_chain(t, p, 0, 3);
    ASSERT_EQ(p.links.size(), 2u);
    EXPECT_EQ(count_kind(t, p, LinkKind::IntraPackage), 2);
    used.insert(t.links()[p.links[0]].to.index);
  }
  EXPECT_DOUBLE_EQ(total, 1.0);
  EXPECT_EQ(used.size(), 4u);
  auto pinned = t.route(0, 3, RouteHint{2});
  ASSERT_EQ(pinned.size(), 1u);
  EXPECT_DOUBLE_EQ(pinned[0].fraction, 1.0);
  EXPECT_EQ(t.node_id(t.links()[pinned[0].links[0]].to), "p0.s2");
  EXPECT_THROW(t.route(0, 3, RouteHint{4}), TopologyError);
}

TEST(TopoNapRouting, TorusDimensionOrderShortestWay) {
  NapShape shape;
  shape.packages = 20;
  shape.torus = {4, 5};
  shape.nodes_per_package = 2;
  shape.local_switches = 2;
  Topology t = generate_nap(shape);
  // From package (0,0) node 0 to package (3,2) node 1: local stage to node 1 (2 stripes),
  // then dimension 0 the short way (0 -> 3 is one step backwards), then dimension 1
  // (0 -> 2 is two steps forwards, three backwards).
  int from = t.package_node(0, 0);
  int to = t.package_node(t.package_at({3, 2}), 1);
  auto paths = t.route(from, to);
  ASSERT_EQ(paths.size(), 2u);
  for (const auto& p : paths) {
    EXPECT_DOUBLE_EQ(p.fraction, 0.5);
    expect_chain(t, p, from, to);
    ASSERT_EQ(p.links.size(), 2u + 3u);
    std::vector<std::string> hops;
    for (size_t i = 2; i < p.links.size(); ++i) hops.push_back(t.node_id(t.links()[p.links[i]].to));
    EXPECT_EQ(hops, (std::vector<std::string>{"p15.n1", "p16.n1", "p17.n1"}));
  }
  // Tie (ring of 4, distance 2) goes the positive way.
  auto tie = t.route(t.package_node(0, 0), t.package_node(t.package_at({2, 0}), 0));
  ASSERT_EQ(tie.size(), 1u);
  ASSERT_EQ(tie[0].links.size(), 2u);
  EXPECT_EQ(t.node_id(t.links()[tie[0].links[0]].to), "p5.n0");
  EXPECT_EQ(t.diameter_hops(), 2 + 2 + 1);  // 4 torus links and 2 local links, minus 1
}

TEST(TopoNapRouting, RingOfTwoHasOneCable) {
  Topology t = generate_nap({});  // 2x2 torus
  int inter = 0;
  for (const auto& l : t.links()) inter += l.kind == LinkKind::InterPackage;
  // 2 dims x 2 rings x 8 nodes, one cable each, two directions.
  EXPECT_EQ(inter, 2 * 2 * 8 * 2);
  EXPECT_EQ(t.diameter_hops(), 3);  // local stage (2 links) + 2 torus links, minus 1
}

TEST(TopoGenerators, RejectBadShapes) {
  NapShape nap;
  nap.torus = {3, 2};
  try {
    generate_nap(nap);
    FAIL();
  } catch (const TopologyError& e) {
    EXPECT_EQ(e.pointer(), "/shape/torus");
    EXPECT_EQ(e.reason(), "torus 3x2 holds 6 packages, not 4");
  }
  BiGraphShape big;
  big.gpus_per_server = 3;
  EXPECT_THROW(generate_bigraph(big), TopologyError);
}

}  // namespace
}  // namespace topocoll::topo

namespace topocoll::topo {
namespace {

TEST(TopoBiGraphRouting, EightGpuServersAllPairs) {
  BiGraphShape shape;
  shape.switches_per_group = 8;
  shape.endpoints_per_switch = 8;
  shape.gpus_per_server = 8;
  Topology t = generate_bigraph(shape);
  const int n = int(t.endpoints().size());
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      auto paths = t.route(a, b);
      ASSERT_EQ(paths.size(), 1u);
      const Path& p = paths[0];
      expect_chain(t, p, a, b);
      const Endpoint &x = t.endpoints()[a], &y = t.endpoints()[b];
      const SwitchRole gx = t.switches()[x.attach_switch].role;
      const SwitchRole gy = t.switches()[y.attach_switch].role;
      if (x.host_index == y.host_index) {
        EXPECT_EQ(count_kind(t, p, LinkKind::HostFabric), 2);
        EXPECT_EQ(p.links.size(), 2u);
      } else if (gx != gy) {
        EXPECT_EQ(count_kind(t, p, LinkKind::InterGroup), 1);
        EXPECT_EQ(p.links.size(), 3u);
      } else if (x.attach_switch != y.attach_switch) {
        EXPECT_EQ(count_kind(t, p, LinkKind::InterGroup), 2);
      }
    }
}

TEST(TopoNapRouting, RelayOnTheSameHostUsesTheHostFabric) {
  NapShape shape;
  shape.gpus_per_host = 2;  // nodes 0,1 of a package share a host
  Topology t = generate_nap(shape);
  // p0.n0 -> p1.n1: relay p0.n1 is on p0.n0's host, then one torus hop.
  int from = t.package_node(0, 0), to = t.package_node(1, 1);
  auto paths = t.route(from, to);
  ASSERT_EQ(paths.size(), 1u);
  expect_chain(t, paths[0], from, to);
  ASSERT_EQ(paths[0].links.size(), 3u);
  EXPECT_EQ(t.links()[paths[0].links[0]].kind, LinkKind::HostFabric);
  EXPECT_EQ(t.links()[paths[0].links[2]].kind, LinkKind::InterPackage);
  // Same host inside a package: the fabric, not the local switches.
  auto local = t.route(from, t.package_node(0, 1));
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(count_kind(t, local[0], LinkKind::HostFabric), 2);
}

TEST(TopoNapRouting, FractionsSumToOneForEveryPair) {
  NapShape shape;
  shape.packages = 6;
  shape.torus = {3, 2};
  shape.nodes_per_package = 4;
  shape.local_switches = 3;
  Topology t = generate_nap(shape);
  const int n = int(t.endpoints().size());
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      double total = 0;
      auto paths = t.route(a, b);
      for (const auto& p : paths) {
        total += p.fraction;
        expect_chain(t, p, a, b);
      }
      EXPECT_NEAR(total, 1.0, 1e-12);
      // Torus hops = sum over dimensions of the ring distance.
      auto ca = t.torus_coord(t.endpoints()[a].package), cb = t.torus_coord(t.endpoints()[b].package);
      int expected = 0;
      for (size_t d = 0; d < ca.size(); ++d) {
        int size = t.torus_dims()[d], fwd = ((cb[d] - ca[d]) % size + size) % size;
        expected += std::min(fwd, size - fwd);
      }
      EXPECT_EQ(count_kind(t, paths[0], LinkKind::InterPackage), expected);
    }
}

TEST(TopoTopology, LatencyOfAPathCountsSwitches) {
  Topology t = generate_bigraph({});
  // s0.g0 (U0) to s1.g0 (L0): 3 links of 1 us and two switches of 0.5 us.
  auto paths = t.route(0, 1);
  EXPECT_DOUBLE_EQ(t.latency_us(paths[0]), 3 * 1.0 + 2 * 0.5);
}

}  // namespace
}  // namespace topocoll::topo
