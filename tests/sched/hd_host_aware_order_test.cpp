// Host-aware HD order (sched/host_aware_hd_order.h): on BiGraphs whose servers hold several GPUs the
// first, largest halving steps stay on the host fabric, and hd_order never keeps an order
// the cost model predicts slower than the search's.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "sched/halving_doubling.h"
#include "sched/hd_order.h"
#include "sched/hd_search_order.h"
#include "sched/host_aware_hd_order.h"
#include "sched/link_load.h"
#include "sched/order_search.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "sched/site_major_order.h"
#include "sched/plan.h"
#include "tests/sched/verify_sweep.h"
#include "topo/generators.h"

namespace topocoll::sched {
namespace {

using topo::Topology;

Topology bigraph(int gpus, const std::string& spread = "alternate", int S = 4, int E = 4) {
  topo::BiGraphShape shape;
  shape.switches_per_group = S;
  shape.endpoints_per_switch = E;
  shape.gpus_per_server = gpus;
  shape.nic_spread = spread;
  return topo::generate_bigraph(shape);
}

int host_of(const Topology& t, const Placement& p, int rank) {
  return t.endpoints()[p.endpoint_of_rank[rank]].host_index;
}

constexpr double kSizes[] = {64 << 10, 4 << 20, 256 << 20};

TEST(HdHostAwareOrder, FirstStepsStayInsideHosts) {
  for (int gpus : {2, 4, 8})
    for (const char* spread : {"alternate", "upper-first", "single"}) {
      Topology t = bigraph(gpus, spread);
      Placement p = first_endpoints(t, 32);
      auto o = host_aware_hd_order(t, p);
      ASSERT_TRUE(o) << gpus << " " << spread;
      EXPECT_FALSE(o->closed_form);
      int lg = std::countr_zero(unsigned(gpus));
      for (int v = 0; v < 32; ++v)
        for (int s = 0; s < 5; ++s) {
          bool same = host_of(t, p, o->rank_of_virtual[v]) ==
                      host_of(t, p, o->rank_of_virtual[v ^ (1 << s)]);
          // Steps below log2(G) pair GPUs of one host; the later ones cross hosts.
          EXPECT_EQ(same, s < lg) << gpus << " " << spread << " v " << v << " step " << s;
        }
      // The load it reports is the load of the order it returns.
      RankOrder again =
          evaluate_order(t, p, halving_doubling_pattern(32, 1 << 20), o->rank_of_virtual);
      EXPECT_DOUBLE_EQ(again.max_load, o->max_load);
      EXPECT_EQ(again.total_hops, o->total_hops);
    }
}

TEST(HdHostAwareOrder, HalvesPutTheHostLocalPairsOnTheirHeavyFirstSteps) {
  // Reduce-scatter and allgather alone run distance q/2 first: there the host-local pairs
  // are v ^ 16, v ^ 8 (the high bits of the virtual rank).
  for (Collective c : {Collective::ReduceScatter, Collective::AllGather})
    for (int gpus : {2, 4, 8}) {
      Topology t = bigraph(gpus);
      Placement p = first_endpoints(t, 32);
      auto o = host_aware_hd_order(t, p, 256 << 20, nullptr, c);
      ASSERT_TRUE(o);
      int lg = std::countr_zero(unsigned(gpus));
      for (int v = 0; v < 32; ++v)
        for (int s = 0; s < 5; ++s) {
          bool same = host_of(t, p, o->rank_of_virtual[v]) ==
                      host_of(t, p, o->rank_of_virtual[v ^ (1 << s)]);
          EXPECT_EQ(same, s >= 5 - lg) << gpus << " v " << v << " step " << s;
        }
    }
  Topology t = bigraph(4);
  EXPECT_THROW(hd_order(t, first_endpoints(t, 32), 1 << 20, nullptr, Collective::AllToAll),
               std::invalid_argument);
}

void expect_never_slower(Collective c, int gpus, const char* spread, double bytes) {
  SCOPED_TRACE(std::string(to_string(c)) + " " + std::to_string(gpus) + " GPUs " + spread +
               " " + std::to_string(bytes));
  Topology t = bigraph(gpus, spread);
  Placement p = first_endpoints(t, 32);
  RouteCache routes(t);
  RankOrder chosen = hd_order(t, p, bytes, &routes, c);
  RankOrder search = hd_search_order(t, p, bytes, &routes);
  double chosen_us = predicted_hd_us(p, chosen.rank_of_virtual, bytes, routes, c);
  double search_us = predicted_hd_us(p, search.rank_of_virtual, bytes, routes, c);
  EXPECT_LE(chosen_us, search_us * (1 + 1e-12));
  // Fields describe the order returned.
  RankOrder again =
      evaluate_order(t, p, halving_doubling_pattern(32, bytes), chosen.rank_of_virtual);
  EXPECT_DOUBLE_EQ(again.max_load, chosen.max_load);
  EXPECT_GE(chosen.max_load + 1e-9, chosen.lower_bound);
  EXPECT_FALSE(chosen.closed_form);
}

TEST(HdHostAwareOrder, NeverPredictedSlowerThanTheSearch) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather})
    for (int gpus : {2, 4, 8})
      for (const char* spread : {"alternate", "upper-first", "single"})
        for (double bytes : kSizes) expect_never_slower(c, gpus, spread, bytes);
}

TEST(HdHostAwareOrder, LargeMessagesMoveTheHeavyStepsOntoTheHostFabric) {
  // 4 and 8 GPUs per server at 256 MiB: half and a quarter of the vector no longer cross
  // the network, so the model's time drops by more than a third (about 51% and 57%).
  for (int gpus : {4, 8}) {
    Topology t = bigraph(gpus);
    Placement p = first_endpoints(t, 32);
    RouteCache routes(t);
    const double bytes = 256 << 20;
    RankOrder chosen = hd_order(t, p, bytes, &routes);
    auto host_aware = host_aware_hd_order(t, p, bytes, &routes);
    ASSERT_TRUE(host_aware);
    EXPECT_EQ(chosen.rank_of_virtual, host_aware->rank_of_virtual) << gpus;
    RankOrder search = hd_search_order(t, p, bytes, &routes);
    double before = predicted_hd_us(p, search.rank_of_virtual, bytes, routes);
    double after = predicted_hd_us(p, chosen.rank_of_virtual, bytes, routes);
    EXPECT_LT(after, before * 2 / 3) << gpus << " GPUs: " << after << " vs " << before;
  }
}

TEST(HdHostAwareOrder, PlannerUsesItForHd) {
  // What `topocoll plan --algo hd` and TOPOCOLL_ALGO=hd get on 8-GPU servers.
  Topology t = bigraph(8);
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather}) {
    PlanRequest r;
    r.collective = c;
    r.algo = "hd";
    r.bytes = 256 << 20;
    Plan plan = make_plan(t, r);
    RouteCache routes(t);
    RankOrder search = hd_search_order(t, plan.placement, double(r.bytes), &routes);
    double before =
        predicted_hd_us(plan.placement, search.rank_of_virtual, double(r.bytes), routes, c);
    EXPECT_LT(plan.predicted_us, before * 2 / 3) << to_string(c);
    EXPECT_TRUE(plan.verified || plan.verification.find("not run") != std::string::npos)
        << to_string(c) << ": " << plan.verification;
  }
}

TEST(HdHostAwareOrder, SchedulesVerifyInAndOutOfPlace) {
  for (int gpus : {2, 4, 8}) {
    Topology t = bigraph(gpus);
    Placement p = first_endpoints(t, 32);
    auto o = host_aware_hd_order(t, p, 256 << 20);
    ASSERT_TRUE(o);
    const auto& order = o->rank_of_virtual;
    for (int64_t count : {int64_t(0), int64_t(31), int64_t(7 * 32 + 3)}) {
      Schedule ar = hd_allreduce(32, count, order);
      EXPECT_TRUE(testing::expect_verified(ar, testing::name(ar)).bitwise_identical)
          << testing::name(ar);
    }
    for (Collective c : {Collective::ReduceScatter, Collective::AllGather}) {
      auto half = host_aware_hd_order(t, p, 256 << 20, nullptr, c);
      ASSERT_TRUE(half);
      for (int64_t count : {int64_t(1), int64_t(3)}) {
        const auto& order_c = half->rank_of_virtual;
        Schedule s = c == Collective::ReduceScatter ? hd_reduce_scatter(32, count, order_c)
                                                    : hd_allgather(32, count, order_c);
        testing::expect_verified(s, testing::name(s));
      }
    }
  }
}

TEST(HdHostAwareOrder, NotOfferedWithoutUniformPowerOfTwoHosts) {
  Topology one = bigraph(1);
  EXPECT_FALSE(host_aware_hd_order(one, first_endpoints(one, 32)));
  Topology four = bigraph(4);
  EXPECT_FALSE(host_aware_hd_order(four, first_endpoints(four, 24)));  // 6 hosts
  EXPECT_FALSE(host_aware_hd_order(four, first_endpoints(four, 18)));  // 4 + 4 + 4 + 4 + 2
  EXPECT_FALSE(host_aware_hd_order(four, first_endpoints(four, 1)));
  Topology two = bigraph(2);
  EXPECT_FALSE(host_aware_hd_order(two, first_endpoints(two, 12)));  // 6 hosts of 2
}

TEST(HdHostAwareOrder, SingleGpuBigraphAndNapKeepTheSearchOrder) {
  // One GPU per host: no host-aware candidate. hd_order is the search's order unless the
  // switch-major one is predicted faster, which happens exactly on the partially filled
  // 8-rank cluster (four hosts behind U0, four behind L0: the closed form loads the one
  // U0-L0 cable at all six steps, switch-major only at the two smallest).
  Topology t = bigraph(1);
  for (int n : {32, 16, 8, 20}) {
    Placement p = first_endpoints(t, n);
    RankOrder a = hd_order(t, p, 4 << 20), b = hd_search_order(t, p, 4 << 20);
    RouteCache routes(t);
    if (n == 8) {
      EXPECT_EQ(a.rank_of_virtual, switch_major_order(t, p));
      EXPECT_LT(predicted_hd_us(p, a.rank_of_virtual, 4 << 20, routes),
                0.6 * predicted_hd_us(p, b.rank_of_virtual, 4 << 20, routes));
      continue;
    }
    EXPECT_EQ(a.rank_of_virtual, b.rank_of_virtual) << n;
    EXPECT_EQ(a.closed_form, b.closed_form) << n;
    EXPECT_DOUBLE_EQ(a.max_load, b.max_load) << n;
  }
  EXPECT_TRUE(hd_order(t, first_endpoints(t, 32)).closed_form);

  // NAP (4 packages x 8 nodes, one node per host): no closed form and no seeds, so the
  // search is search_order on the HD pattern.
  topo::NapShape shape;
  Topology nap = topo::generate_nap(shape);
  Placement p = first_endpoints(nap, 32);
  EXPECT_FALSE(host_aware_hd_order(nap, p));
  EXPECT_EQ(hd_order(nap, p, 4 << 20).rank_of_virtual,
            search_order(nap, p, halving_doubling_pattern(32, 4 << 20)).rank_of_virtual);
}

}  // namespace
}  // namespace topocoll::sched
