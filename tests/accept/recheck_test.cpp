// The cable phase's second look: which slow flows run again, and that a flow slow once
// through a busy machine clears its cable while a degraded cable stays named.
#include "accept/recheck.h"

#include <gtest/gtest.h>

#include "accept/flow_rounds.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"

namespace topocoll::accept {
namespace {

topo::Topology bigraph32() {
  return topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
}

FlowMeasurement flow(const topo::Topology& t, int src, int dst, int round, double ratio, bool dead = false) {
  FlowMeasurement m;
  m.flow.src = src;
  m.flow.dst = dst;
  m.flow.links = flow_links(t, src, dst, -1);
  m.round = round;
  m.expected_gbps = 0.02;
  m.measured_gbps = dead ? 0 : ratio * m.expected_gbps;
  m.dead = dead;
  return m;
}

TEST(Recheck, OnlyAliveSlowFlowsAcrossSlowCablesRunAgainGroupedByRound) {
  const auto t = bigraph32();
  std::vector<FlowMeasurement> flows = {flow(t, 0, 9, 0, 0.77), flow(t, 1, 2, 0, 1.0), flow(t, 3, 20, 1, 0.3),
                                        flow(t, 4, 21, 1, 0, true), flow(t, 5, 22, 2, 0.95)};
  const auto loc = localize(t, flows, 0.8);
  const auto plan = flows_to_recheck(loc, flows, 0.8, 6);
  // The round nearest the threshold first (77 % may be the machine), then the 30 % one.
  using Plan = std::vector<std::pair<int, std::vector<int>>>;
  EXPECT_EQ(plan, (Plan{{0, {0}}, {1, {2}}}));
  EXPECT_EQ(flows_to_recheck(loc, flows, 0.8, 1), (Plan{{0, {0}}}));
  // Order by nearness, not by round: the 30 % flow in round 0, the 77 % one in round 1.
  flows[0].round = 1, flows[2].round = 0;
  EXPECT_EQ(flows_to_recheck(loc, flows, 0.8, 6), (Plan{{1, {0}}, {0, {2}}}));
}

TEST(Recheck, AFlowSlowOnceClearsItsCableADegradedCableStaysNamed) {
  const auto t = bigraph32();
  // s0 -> s9 and s3 -> s20 alone across their cables; one was the machine, one a cable.
  std::vector<FlowMeasurement> flows = {flow(t, 0, 9, 0, 0.77), flow(t, 3, 20, 1, 0.26)};
  auto slow_on = [&](const Localization& loc, const FlowMeasurement& m) {
    int n = 0;
    for (int l : m.flow.links) n += loc.links[l].state == CableState::Slow;
    return n;
  };
  auto loc = localize(t, flows, 0.8);
  ASSERT_GT(slow_on(loc, flows[0]), 0);
  ASSERT_GT(slow_on(loc, flows[1]), 0);
  Recheck busy{flows[0], flow(t, 0, 9, 0, 0.97)}, degraded{flows[1], flow(t, 3, 20, 1, 0.24)};
  EXPECT_DOUBLE_EQ(busy.best().ratio(), 0.97);
  EXPECT_DOUBLE_EQ(degraded.best().ratio(), 0.26);
  flows = {busy.best(), degraded.best()};
  loc = localize(t, flows, 0.8);
  EXPECT_EQ(slow_on(loc, flows[0]), 0);
  EXPECT_GT(slow_on(loc, flows[1]), 0);
}

TEST(Recheck, ARunThatFailedCountsOnlyWhenBothDid) {
  const auto t = bigraph32();
  EXPECT_DOUBLE_EQ((Recheck{flow(t, 0, 9, 0, 0.5), flow(t, 0, 9, 0, 0, true)}.best().ratio()), 0.5);
  EXPECT_TRUE((Recheck{flow(t, 0, 9, 0, 0, true), flow(t, 0, 9, 0, 0, true)}.best().dead));
}

}  // namespace
}  // namespace topocoll::accept
