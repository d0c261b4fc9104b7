// Where a job's ranks run (sched/job_placement.h): the scheduler's first endpoints, spread
// over switches or packages, the topology order `topocoll order` prints, an explicit list;
// and the hostfiles of an order.
#include <gtest/gtest.h>

#include <set>

#include "sched/job_placement.h"
#include "sched/placement.h"
#include "sched/plan.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::sched {
namespace {

using testing_support::example_topology;

double ring_load(const topo::Topology& t, const std::vector<int>& endpoints) {
  PlanRequest req;
  req.algo = "ring";
  req.bytes = int64_t(endpoints.size()) * 4096;
  req.endpoints = endpoints;
  req.verify = false;
  return make_plan(t, req).link_load.max_load;
}

std::vector<int> place(const topo::Topology& t, int n, const std::string& how) {
  return place_job(t, n, parse_job_placement(how));
}

TEST(JobPlacement, SchedulerTakesTheFirstEndpointsInFileOrder) {
  const auto t = example_topology("bigraph-32.json");
  EXPECT_EQ(place(t, 4, "scheduler"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(place(t, 0, "scheduler").size(), 32u);  // 0: every endpoint
}

TEST(JobPlacement, SpreadTakesOneEndpointPerSwitchFirst) {
  const auto t = example_topology("bigraph-32.json");
  const auto e = place(t, 8, "spread");
  std::set<int> switches;
  for (int x : e) switches.insert(t.endpoints()[x].attach_switch);
  EXPECT_EQ(switches.size(), 8u);  // bigraph-32: 8 switches, one rank on each
  const auto nap = example_topology("nap-4x8.json");
  std::set<int> packages;
  for (int x : place(nap, 4, "spread")) packages.insert(nap.endpoints()[x].package);
  EXPECT_EQ(packages.size(), 4u);
}

// The scheduler's 16 endpoints of bigraph-32 in rank order put four ring hops on one link;
// in the topology order every hop has a link of its own, and the order is what `topocoll
// order` prints for those hosts.
TEST(JobPlacement, TopologyOrderMakesTheRankOrderRingContentionFree) {
  const auto t = example_topology("bigraph-32.json");
  const auto scheduler = place(t, 16, "scheduler");
  const auto ordered = place(t, 16, "topology-order");
  EXPECT_EQ(std::set<int>(scheduler.begin(), scheduler.end()), std::set<int>(ordered.begin(), ordered.end()));
  EXPECT_DOUBLE_EQ(ring_load(t, scheduler), 4.0);
  EXPECT_DOUBLE_EQ(ring_load(t, ordered), 1.0);
  EXPECT_EQ(hostfile(t, ordered, "endpoints"),
            "s0.g0,s2.g0,s4.g0,s6.g0,s1.g0,s3.g0,s5.g0,s7.g0,s8.g0,s10.g0,s12.g0,s14.g0,s9.g0,s11.g0,s13.g0,s15.g0\n");
}

// Launchers number ranks host by host: an 8-GPU server's endpoints stay together.
TEST(JobPlacement, TopologyOrderKeepsEachHostsEndpointsTogether) {
  const auto t = example_topology("bigraph-16x8.json");
  const auto ordered = place(t, 32, "topology-order");
  ASSERT_EQ(ordered.size(), 32u);
  for (size_t r = 0; r + 1 < ordered.size(); ++r) {
    const int h = t.endpoints()[ordered[r]].host_index, next = t.endpoints()[ordered[r + 1]].host_index;
    if (h == next) continue;
    for (size_t later = r + 1; later < ordered.size(); ++later) {
      EXPECT_NE(t.endpoints()[ordered[later]].host_index, h) << "host " << t.hosts()[h].name << " split";
    }
  }
}

TEST(JobPlacement, AnExplicitListByIdOrIndex) {
  const auto t = example_topology("bigraph-32.json");
  EXPECT_EQ(place(t, 0, "endpoints=s9.g0,3,s0.g0"), (std::vector<int>{9, 3, 0}));
  EXPECT_EQ(place(t, 3, "endpoints=s9.g0,3,s0.g0").size(), 3u);
}

TEST(JobPlacement, BadPlacementsSayWhatIsWrong) {
  const auto t = example_topology("bigraph-32.json");
  auto message = [&](int n, const std::string& how) {
    try {
      place(t, n, how);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(4, "packed").find("expected scheduler, spread, topology-order or endpoints="), std::string::npos);
  EXPECT_NE(message(33, "scheduler").find("33 ranks, but bigraph-32 has 32 endpoints"), std::string::npos);
  EXPECT_NE(message(2, "endpoints=s0.g0,s1.g0,s2.g0").find("names 3 endpoints for 2 ranks"), std::string::npos);
  EXPECT_NE(message(0, "endpoints=s0.g0,s99.g0").find("'s99.g0' is no endpoint"), std::string::npos);
  EXPECT_NE(message(0, "endpoints=s0.g0,0").find("s0.g0 is named twice"), std::string::npos);
  EXPECT_NE(message(0, "endpoints=").find("name at least one endpoint"), std::string::npos);
}

TEST(JobPlacement, HostfilesInEveryFormat) {
  const auto t = example_topology("bigraph-16x8.json");
  // Two endpoints of s1, then one of s0.
  const std::vector<int> e = {8, 9, 0};
  EXPECT_EQ(hostfile(t, e, "list"), "s1\ns0\n");
  EXPECT_EQ(hostfile(t, e, "mpirun"), "s1 slots=2\ns0 slots=1\n");
  EXPECT_EQ(hostfile(t, e, "torchrun"), "s1 0\ns0 1\n");
  EXPECT_EQ(hostfile(t, e, "slurm"), "s1\ns1\ns0\n");
  EXPECT_EQ(hostfile(t, e, "endpoints"), t.endpoints()[8].id + "," + t.endpoints()[9].id + "," + t.endpoints()[0].id + "\n");
  EXPECT_THROW(hostfile(t, e, "pbs"), std::invalid_argument);
}

TEST(JobPlacement, NamesRoundTrip) {
  for (const char* text : {"scheduler", "spread", "topology-order", "endpoints=s0.g0,s1.g0"})
    EXPECT_EQ(to_string(parse_job_placement(text)), text);
}

}  // namespace
}  // namespace topocoll::sched
