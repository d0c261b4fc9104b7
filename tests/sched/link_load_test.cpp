#include "sched/link_load.h"

#include <gtest/gtest.h>

#include <numeric>

#include "tests/sched/pattern_schedule.h"
#include "topo/generators.h"

namespace topocoll::sched {
namespace {

using topo::Topology;

Topology bigraph32() { return topo::generate_bigraph(topo::BiGraphShape{}); }

int switch_link(const Topology& t, const std::string& from, const std::string& to) {
  auto a = t.find_switch(from), b = t.find_switch(to);
  auto l = t.find_link({topo::NodeRef::Type::Switch, *a}, {topo::NodeRef::Type::Switch, *b});
  return l ? *l : -1;
}

double load_on(const StepLoad& step, int link) {
  for (const auto& u : step.links)
    if (u.link == link) return u.flows;
  return 0;
}

// bigraph-32 numbers hosts s0..s31 with NIC group k % 2 and switch k / 8 of that group, so
// ranks 8a..8a+7 alternate between U_a and L_a.
TEST(LinkLoad, RankOrderRingOnBigraph32) {
  Topology t = bigraph32();
  Pattern ring(1);
  for (int i = 0; i < 32; ++i) ring[0].pairs.emplace_back(i, (i + 1) % 32);
  Schedule s = testing::pattern_schedule(32, ring, 1000);
  RouteCache routes(t);
  LinkLoad load = analyze_link_load(s, first_endpoints(t, 32), 4, routes);
  ASSERT_EQ(load.steps.size(), 1u);
  const StepLoad& st = load.steps[0];
  EXPECT_EQ(st.flows, 32);
  EXPECT_EQ(st.bytes, 32 * 4000);
  // Hops 8a+2i -> 8a+2i+1 (i = 0..3) all take U_a -> L_a; 8a+2i+1 -> 8a+2i+2 (i = 0..2)
  // take L_a -> U_a; 8a+7 -> 8a+8 takes L_a -> U_{a+1}.
  for (int a = 0; a < 4; ++a) {
    std::string U = "U" + std::to_string(a), L = "L" + std::to_string(a);
    EXPECT_DOUBLE_EQ(load_on(st, switch_link(t, U, L)), 4.0) << U << "->" << L;
    EXPECT_DOUBLE_EQ(load_on(st, switch_link(t, L, U)), 3.0) << L << "->" << U;
    EXPECT_DOUBLE_EQ(load_on(st, switch_link(t, L, "U" + std::to_string((a + 1) % 4))), 1.0);
    for (const auto& u : st.links)
      if (u.link == switch_link(t, U, L)) {
        EXPECT_DOUBLE_EQ(u.bytes, 4 * 4000.0);
      }
  }
  EXPECT_DOUBLE_EQ(st.max_load, 4.0);
  EXPECT_EQ(st.bottleneck_link, std::min({switch_link(t, "U0", "L0"), switch_link(t, "U1", "L1"),
                                          switch_link(t, "U2", "L2"), switch_link(t, "U3", "L3")}));
  EXPECT_EQ(st.hops, 32 * 3);
  // 32 access links up, 32 down, 4 + 4 + 4 inter-group links.
  EXPECT_EQ(st.links.size(), 64u + 12u);
}

TEST(LinkLoad, IdentityHdOnBigraph32) {
  Topology t = bigraph32();
  Schedule s = testing::pattern_schedule(32, halving_doubling_pattern(32, 1), 1);
  RouteCache routes(t);
  LinkLoad load = analyze_link_load(s, first_endpoints(t, 32), 4, routes);
  // s = 0 (v^1): U_a's four ranks all talk to L_a over one link: 4.
  // s = 1, 2 (v^2, v^4): partners behind the same switch: only NIC links, load 1.
  // s = 3, 4 (v^8, v^16): same group, other switch, through the middle switch
  // (index(s)+index(t)) mod 4; e.g. at s = 4 link U2->L2 carries U2's four flows to U0
  // and L0's four flows to L2: 8.
  std::vector<double> expect = {4, 1, 1, 8, 8, 8, 8, 1, 1, 4};
  ASSERT_EQ(load.steps.size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i)
    EXPECT_DOUBLE_EQ(load.steps[i].max_load, expect[i]) << "step " << i;
  EXPECT_DOUBLE_EQ(load.max_load, 8.0);
  EXPECT_EQ(load.worst_step, 3);
  EXPECT_DOUBLE_EQ(load_on(load.steps[4], switch_link(t, "U2", "L2")), 8.0);
}

TEST(LinkLoad, NapStripesOverLocalSwitches) {
  topo::NapShape shape;
  shape.packages = 4;
  shape.nodes_per_package = 4;
  shape.local_switches = 2;
  shape.torus = {2, 2};
  Topology t = topo::generate_nap(shape);
  Pattern one(1);
  one[0].pairs.emplace_back(0, 1);
  Schedule s = testing::pattern_schedule(16, one, 100);
  RouteCache routes(t);
  Placement p = first_endpoints(t, 16);
  LinkLoad load = analyze_link_load(s, p, 4, routes);
  // One flow split over two local switches: four links at half a flow each.
  EXPECT_DOUBLE_EQ(load.max_load, 0.5);
  EXPECT_EQ(load.steps[0].links.size(), 4u);
  for (const auto& u : load.steps[0].links) EXPECT_DOUBLE_EQ(u.bytes, 200.0);
}

TEST(LinkLoad, SummaryWithoutDetail) {
  Topology t = bigraph32();
  Schedule s = testing::pattern_schedule(32, halving_doubling_pattern(32, 1), 1);
  RouteCache routes(t);
  LinkLoad load = analyze_link_load(s, first_endpoints(t, 32), 4, routes, {.keep_links = false});
  EXPECT_DOUBLE_EQ(load.max_load, 8.0);
  for (const auto& st : load.steps) EXPECT_TRUE(st.links.empty());
}

// The cache takes BiGraph cross-group bodies from the cable table; it must agree with
// Topology::route() for every pair.
TEST(LinkLoad, RouteCacheAgreesWithRoute) {
  topo::BiGraphShape multi;
  multi.gpus_per_server = 4;
  topo::NapShape nap;
  nap.packages = 4;
  nap.nodes_per_package = 4;
  nap.local_switches = 2;
  nap.torus = {2, 2};
  for (const Topology& t : {bigraph32(), topo::generate_bigraph(multi), topo::generate_nap(nap)}) {
    RouteCache cache(t);
    std::vector<PathView> views;
    int n = int(t.endpoints().size());
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        auto expect = t.route(a, b);
        cache.paths(a, b, views);
        ASSERT_EQ(views.size(), expect.size()) << a << "->" << b;
        for (size_t i = 0; i < views.size(); ++i) {
          std::vector<int> got;
          views[i].for_each_link([&](int l) { got.push_back(l); });
          EXPECT_EQ(got, expect[i].links) << t.name() << " " << a << "->" << b;
          EXPECT_DOUBLE_EQ(views[i].fraction, expect[i].fraction);
        }
      }
  }
}

TEST(LinkLoad, RejectsMismatchedPlacement) {
  Topology t = bigraph32();
  Schedule s = testing::pattern_schedule(32, halving_doubling_pattern(32, 1), 1);
  RouteCache routes(t);
  EXPECT_THROW(analyze_link_load(s, first_endpoints(t, 16), 4, routes), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::sched
