// The numbers `topocoll describe` prints for the bundled examples.
#include <gtest/gtest.h>

#include "topo/bisection.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::topo {
namespace {

using testing_support::example_topology;

int cables(const Topology& t, LinkKind kind) {
  int n = 0;
  for (const auto& l : t.links()) n += l.kind == kind && l.id < l.reverse;
  return n;
}

TEST(TopoDescribe, BiGraph32) {
  Topology t = example_topology("bigraph-32.json");
  EXPECT_EQ(t.kind(), TopologyKind::BiGraph);
  EXPECT_EQ(t.endpoints().size(), 32u);
  EXPECT_EQ(t.hosts().size(), 32u);
  EXPECT_EQ(t.switches().size(), 8u);  // one GPU per server: no host fabric
  EXPECT_EQ(t.group_switches(SwitchRole::Upper).size(), 4u);
  EXPECT_EQ(t.group_switches(SwitchRole::Lower).size(), 4u);
  EXPECT_EQ(cables(t, LinkKind::Access), 32);
  EXPECT_EQ(cables(t, LinkKind::InterGroup), 16);
  for (const auto& s : t.switches()) {
    EXPECT_EQ(s.ports, 8);
    EXPECT_EQ(t.out_links({NodeRef::Type::Switch, int(&s - &t.switches()[0])}).size(), 8u);
  }
  EXPECT_EQ(t.diameter_hops(), 3);
  // K(4,4) split two upper + two lower per side: 2*2*2 = 8 inter-group cables of 100 Gb/s.
  Bisection b = bisection(t);
  EXPECT_DOUBLE_EQ(b.gbps, 800);
  EXPECT_EQ(b.cables, 8);
  EXPECT_TRUE(b.exact);
}

TEST(TopoDescribe, BiGraph16x8) {
  Topology t = example_topology("bigraph-16x8.json");
  EXPECT_EQ(t.endpoints().size(), 128u);
  EXPECT_EQ(t.hosts().size(), 16u);
  EXPECT_EQ(cables(t, LinkKind::InterGroup), 64);
  EXPECT_EQ(cables(t, LinkKind::HostFabric), 128);
  EXPECT_EQ(t.diameter_hops(), 3);
  EXPECT_DOUBLE_EQ(bisection(t).gbps, 32 * 100);
}

TEST(TopoDescribe, Nap4x8) {
  Topology t = example_topology("nap-4x8.json");
  EXPECT_EQ(t.package_count(), 4);
  EXPECT_EQ(cables(t, LinkKind::IntraPackage), 4 * 8 * 4);
  EXPECT_EQ(cables(t, LinkKind::InterPackage), 2 * 2 * 8);
  // Local stage (2 links) + one hop in each of the two dimensions = 4 links.
  EXPECT_EQ(t.diameter_hops(), 3);
  // Cut across one dimension of size 2: 2 rings x 8 nodes x 1 cable x 256 Gb/s.
  EXPECT_DOUBLE_EQ(bisection(t).gbps, 16 * 256);
}

TEST(TopoDescribe, Nap16x8) {
  Topology t = example_topology("nap-16x8.json");
  EXPECT_EQ(t.package_count(), 16);
  EXPECT_EQ(t.endpoints().size(), 128u);
  EXPECT_EQ(t.diameter_hops(), 5);  // 2 local links + 2 + 2 torus links, minus 1
  // Rings of 4 lose 2 cables each: 4 rings x 8 nodes x 2 x 256 Gb/s.
  EXPECT_DOUBLE_EQ(bisection(t).gbps, 64 * 256);
}

TEST(TopoDescribe, NapOfOddRingsAndOneNodePerPackageIsCutAcrossItsShortestRing) {
  // Neither an even dimension nor a package to halve: reported as 0 Gb/s before.
  auto nap = [](const std::string& torus) {
    return load_topology_text(R"({"kind":"nap","shape":{"torus":)" + torus +
                              R"(,"nodes_per_package":1,"local_switches":1,"inter_gbps":100,"intra_gbps":100}})");
  };
  EXPECT_DOUBLE_EQ(bisection(nap("[3]")).gbps, 2 * 100);     // a ring of 3 loses 2 cables
  EXPECT_DOUBLE_EQ(bisection(nap("[5,3]")).gbps, 6 * 100);   // 3 rings of 5 (not 5 of 3), 2 cables each
  EXPECT_NE(bisection(nap("[5,3]")).method.find("odd (5)"), std::string::npos) << bisection(nap("[5,3]")).method;
}

}  // namespace
}  // namespace topocoll::topo
