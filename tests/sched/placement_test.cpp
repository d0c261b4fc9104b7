#include "sched/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "sched/hd_order.h"
#include "sched/hd_search_order.h"
#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/ring_order.h"
#include "sched/site_major_order.h"
#include "tests/sched/pattern_schedule.h"
#include "topo/generators.h"

namespace topocoll::sched {
namespace {

using topo::BiGraphShape;
using topo::SwitchRole;
using topo::Topology;

Topology bigraph(int S, int E, int gpus = 1, std::string spread = "alternate") {
  BiGraphShape shape;
  shape.switches_per_group = S;
  shape.endpoints_per_switch = E;
  shape.gpus_per_server = gpus;
  shape.nic_spread = spread;
  return topo::generate_bigraph(shape);
}

bool is_permutation_of_ranks(const std::vector<int>& order, int n) {
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  return sorted == expect;
}

// Routes the HD pattern of an order step by step and returns each step's worst load.
std::vector<double> hd_step_loads(const Topology& t, const Placement& p, const RankOrder& o) {
  Pattern pattern = halving_doubling_pattern(p.nranks(), 1 << 20);
  Schedule s = testing::pattern_schedule(p.nranks(), pattern, 1024);
  RouteCache routes(t);
  LinkLoad load = analyze_link_load(s, testing::through_order(p, o.rank_of_virtual), 4, routes);
  std::vector<double> out;
  for (const auto& st : load.steps) out.push_back(st.max_load);
  return out;
}

TEST(Placement, ClosedFormOnBigraph32HasLoadOneOnEveryStep) {
  Topology t = bigraph(4, 4);  // 2 groups x 4 switches x 4 endpoints: m = 2
  Placement p = first_endpoints(t, 32);
  RankOrder o = hd_order(t, p);
  EXPECT_TRUE(o.closed_form);
  ASSERT_TRUE(is_permutation_of_ranks(o.rank_of_virtual, 32));
  EXPECT_DOUBLE_EQ(o.max_load, 1.0);
  EXPECT_DOUBLE_EQ(o.lower_bound, 1.0);
  auto loads = hd_step_loads(t, p, o);
  ASSERT_EQ(loads.size(), 10u);  // 5 halving + 5 doubling steps
  for (double l : loads) EXPECT_DOUBLE_EQ(l, 1.0);

  // The analysis behind it: every pair is cross-group and every directed inter-group link
  // is used by exactly one flow per step (16 upper senders over 16 links, and back).
  const auto& eps = t.endpoints();
  auto group = [&](int rank) {
    return t.switches()[eps[p.endpoint_of_rank[rank]].attach_switch].role;
  };
  for (int s = 0; s < 5; ++s) {
    std::set<std::pair<int, int>> used;
    for (int v = 0; v < 32; ++v) {
      int a = o.rank_of_virtual[v], b = o.rank_of_virtual[v ^ (1 << s)];
      EXPECT_NE(group(a), group(b)) << "step " << s << " virtual " << v;
      auto link = std::make_pair(eps[p.endpoint_of_rank[a]].attach_switch,
                                 eps[p.endpoint_of_rank[b]].attach_switch);
      EXPECT_TRUE(used.insert(link).second) << "step " << s << " reuses a link";
    }
    EXPECT_EQ(used.size(), 32u);  // 16 links each way, all of them
  }
}

TEST(Placement, GeneralisedClosedFormReachesItsBound) {
  // E < S: still one flow per link; E > S: E/S flows, which is the bound.
  for (auto [S, E] : {std::pair{8, 4}, std::pair{4, 2}, std::pair{2, 8}, std::pair{8, 8}}) {
    Topology t = bigraph(S, E);
    Placement p = first_endpoints(t, 2 * S * E);
    RankOrder o = hd_search_order(t, p);
    EXPECT_TRUE(o.closed_form) << S << "x" << E;
    EXPECT_DOUBLE_EQ(o.max_load, std::max(1.0, double(E) / S)) << S << "x" << E;
    EXPECT_DOUBLE_EQ(o.lower_bound, o.max_load);
    // hd_order keeps it unless the cost model predicts another order faster: with E > S
    // (2x8) the closed form's E/S flows per link at every step lose to switch-major, whose
    // three largest steps stay behind one switch.
    RouteCache routes(t);
    const RankOrder chosen = hd_order(t, p);
    EXPECT_LE(predicted_hd_us(p, chosen.rank_of_virtual, 1 << 20, routes),
              predicted_hd_us(p, o.rank_of_virtual, 1 << 20, routes) * (1 + 1e-9));
    EXPECT_EQ(chosen.closed_form, E <= S) << S << "x" << E;
  }
}

TEST(Placement, IdentityHdOnBigraph32IsWorse) {
  Topology t = bigraph(4, 4);
  Placement p = first_endpoints(t, 32);
  std::vector<int> identity(32);
  std::iota(identity.begin(), identity.end(), 0);
  RankOrder o = evaluate_order(t, p, halving_doubling_pattern(32, 1), identity);
  // Step 4 (v ^ 16) sends U2's four ranks to U0 through L2 and L0's four to L2 through U2:
  // link U2->L2 carries 8 flows.
  EXPECT_DOUBLE_EQ(o.max_load, 8.0);
}

void expect_search_sound(const Topology& t, const Placement& p, const char* what) {
  RankOrder o = hd_order(t, p);
  EXPECT_FALSE(o.closed_form) << what;
  ASSERT_TRUE(is_permutation_of_ranks(o.rank_of_virtual, p.nranks())) << what;
  EXPECT_GE(o.max_load + 1e-9, o.lower_bound) << what;
  EXPECT_GT(o.lower_bound, 0) << what;
  // The load it reports is the load of the order it returns.
  Pattern pattern = halving_doubling_pattern(p.nranks(), 1 << 20);
  RankOrder again = evaluate_order(t, p, pattern, o.rank_of_virtual);
  EXPECT_DOUBLE_EQ(again.max_load, o.max_load) << what;
  // Never worse than leaving ranks in order.
  std::vector<int> identity(p.nranks());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_LE(o.max_load, evaluate_order(t, p, pattern, identity).max_load + 1e-9) << what;
}

TEST(Placement, SearchOnPartialCluster) {
  Topology t = bigraph(4, 4);
  expect_search_sound(t, first_endpoints(t, 16 + 4), "20 of 32");
  // Half the cluster: 2 switches per group with 4 ranks each. Four ranks of one switch are
  // XOR-closed for at most two of the four steps, so some step sends all four out over two
  // uplinks: load 2 is the best, and the closed form reaches it.
  Placement p = first_endpoints(t, 16);
  RankOrder o = hd_order(t, p);
  EXPECT_TRUE(o.closed_form);
  EXPECT_DOUBLE_EQ(o.max_load, 2.0);
  EXPECT_DOUBLE_EQ(o.lower_bound, 2.0);
}

TEST(Placement, SearchOnNonPowerOfTwo) {
  Topology t = bigraph(4, 4);
  expect_search_sound(t, first_endpoints(t, 24), "24 of 32");
  expect_search_sound(t, first_endpoints(t, 27), "27 of 32");
}

TEST(Placement, SearchOnMultiGpuServers) {
  // 4 GPUs per server, NICs alternating between the groups.
  Topology t = bigraph(4, 4, 4);
  Placement p = first_endpoints(t, 32);
  expect_search_sound(t, p, "4-GPU servers");
  // The search alone reaches load 1 (network on every step); hd_order may prefer the
  // host-aware order (tests/sched/hd_host_aware_order_test.cpp).
  RankOrder o = hd_search_order(t, p);
  EXPECT_LE(o.max_load, 1.0 + 1e-9);
}

TEST(Placement, MoreEndpointsPerSwitchThanSwitches) {
  Topology t = bigraph(2, 8);
  Placement p = first_endpoints(t, 24);
  expect_search_sound(t, p, "2x8 partial");
}

TEST(Placement, MissingRankIsNamed) {
  Topology t = bigraph(4, 4);
  std::vector<RankLocation> ranks = {{"s0", 0}, {"s1", 0}, {"s2", 0}, {"nohost", 0}};
  try {
    place_ranks(t, ranks);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("nohost"), std::string::npos) << e.what();
  }
  std::vector<RankLocation> twice = {{"s0", 0}, {"s0", 0}};
  EXPECT_THROW(place_ranks(t, twice), std::invalid_argument);
  std::vector<RankLocation> ok = {{"s5", 0}, {"s2", 0}};
  Placement p = place_ranks(t, ok);
  EXPECT_EQ(t.endpoints()[p.endpoint_of_rank[0]].host, "s5");
  EXPECT_THROW(first_endpoints(t, 33), std::invalid_argument);
  EXPECT_THROW(first_endpoints(t, 0), std::invalid_argument);
  EXPECT_THROW(explicit_endpoints(t, {0, 0}), std::invalid_argument);
}

TEST(Placement, TopologyAwareRingIsContentionFree) {
  for (auto [S, E] : {std::pair{4, 4}, std::pair{8, 4}, std::pair{4, 2}}) {
    Topology t = bigraph(S, E);
    int n = 2 * S * E;
    Placement p = first_endpoints(t, n);
    std::vector<int> ring = topology_aware_ring(t, p);
    ASSERT_TRUE(is_permutation_of_ranks(ring, n));
    Pattern pattern(1);
    for (int i = 0; i < n; ++i) pattern[0].pairs.emplace_back(i, (i + 1) % n);
    EXPECT_DOUBLE_EQ(evaluate_order(t, p, pattern, ring).max_load, 1.0) << S << "x" << E;
    EXPECT_GT(evaluate_order(t, p, pattern, rank_order_ring(n)).max_load, 1.0);
  }
  // Partial cluster: still a permutation and no worse than rank order.
  Topology t = bigraph(4, 4);
  Placement p = first_endpoints(t, 20);
  std::vector<int> ring = topology_aware_ring(t, p);
  ASSERT_TRUE(is_permutation_of_ranks(ring, 20));
}

TEST(Placement, PackageMajorOrder) {
  topo::NapShape shape;
  shape.packages = 4;
  shape.nodes_per_package = 4;
  shape.local_switches = 2;
  shape.torus = {2, 2};
  Topology t = topo::generate_nap(shape);
  Placement p = first_endpoints(t, 16);
  std::vector<int> order = package_major_order(t, p);
  ASSERT_TRUE(is_permutation_of_ranks(order, 16));
  for (int i = 1; i < 16; ++i) {
    const auto& a = t.endpoints()[p.endpoint_of_rank[order[i - 1]]];
    const auto& b = t.endpoints()[p.endpoint_of_rank[order[i]]];
    EXPECT_LE(std::make_pair(a.package, a.node), std::make_pair(b.package, b.node));
  }
}

}  // namespace
}  // namespace topocoll::sched
