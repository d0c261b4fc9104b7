// The cable phase's rounds: every round is contention-free by the model (each directed cable
// carries at most one flow, and the link-load analysis agrees), and together they cross
// every cable in both directions, each several times by flows that differ elsewhere.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "accept/flow_rounds.h"
#include "topo/cable_names.h"
#include "topo/generators.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::accept {
namespace {

using testing_support::example_topology;

std::vector<int> all_endpoints(const topo::Topology& t) {
  std::vector<int> v(t.endpoints().size());
  std::iota(v.begin(), v.end(), 0);
  return v;
}

void expect_good_plan(const topo::Topology& t, const std::vector<int>& present, int coverage) {
  const RoundPlan plan = plan_flow_rounds(t, present, coverage);
  ASSERT_FALSE(plan.rounds.empty());
  std::vector<int> crossed(t.links().size(), 0);
  std::set<std::tuple<int, int, int>> seen;
  for (const auto& round : plan.rounds) {
    std::vector<int> on_link(t.links().size(), 0);
    for (const auto& f : round.flows) {
      EXPECT_TRUE(seen.insert({f.src, f.dst, f.lane}).second) << "a flow measured twice";
      EXPECT_EQ(f.links, flow_links(t, f.src, f.dst, f.lane));
      for (int l : f.links) {
        EXPECT_EQ(++on_link[l], 1) << topo::link_name(t, l) << " carries two flows in one round";
        ++crossed[l];
      }
    }
  }
  // Every directed cable between present endpoints is crossed, `coverage` times where
  // enough distinct flows exist.
  for (int link : topo::cable_links(t))
    for (int l : {link, t.links()[link].reverse}) {
      const bool reachable = std::find(plan.unreachable.begin(), plan.unreachable.end(), l) == plan.unreachable.end();
      if (!reachable) continue;
      EXPECT_GE(crossed[l], std::min(coverage, 2)) << topo::link_name(t, l);
      EXPECT_EQ(crossed[l], plan.crossings[l]);
    }
}

TEST(FlowRounds, BiGraph32EveryCableBothWaysThreeTimesWithoutContention) {
  const auto t = example_topology("bigraph-32.json");
  expect_good_plan(t, all_endpoints(t), 3);
  const RoundPlan plan = plan_flow_rounds(t, all_endpoints(t), 3);
  EXPECT_TRUE(plan.unreachable.empty());
  EXPECT_LE(plan.rounds.size(), 12u);
  for (int link : topo::cable_links(t)) EXPECT_GE(plan.crossings[link], 3) << topo::link_name(t, link);
}

TEST(FlowRounds, NapPinsFlowsToLocalSwitchesAndCoversTorusLinks) {
  const auto t = example_topology("nap-4x8.json");
  expect_good_plan(t, all_endpoints(t), 3);
  const RoundPlan plan = plan_flow_rounds(t, all_endpoints(t), 3);
  EXPECT_TRUE(plan.unreachable.empty());
  std::set<int> lanes;
  for (const auto& r : plan.rounds)
    for (const auto& f : r.flows) lanes.insert(f.lane);
  EXPECT_TRUE(lanes.count(0) && lanes.count(3));
}

TEST(FlowRounds, MissingEndpointsLeaveTheirCablesUnreachable) {
  const auto t = example_topology("bigraph-32.json");
  std::vector<int> present = all_endpoints(t);
  present.erase(present.begin() + 5);  // s5.g0 has no rank
  expect_good_plan(t, present, 3);
  const RoundPlan plan = plan_flow_rounds(t, present, 3);
  std::set<std::string> unreachable;
  for (int l : plan.unreachable) unreachable.insert(topo::link_name(t, l));
  EXPECT_EQ(unreachable, (std::set<std::string>{"s5.g0->L0", "L0->s5.g0"}));
}

TEST(FlowRounds, MultiGpuServersAndSmallJobs) {
  topo::BiGraphShape b;
  b.switches_per_group = 2;
  b.endpoints_per_switch = 4;
  b.gpus_per_server = 4;
  const auto t = topo::generate_bigraph(b);
  expect_good_plan(t, all_endpoints(t), 3);
  expect_good_plan(example_topology("bigraph-32.json"), {0, 1, 2, 3}, 2);
}

}  // namespace
}  // namespace topocoll::accept
