#include "sched/cost_model.h"

#include <gtest/gtest.h>

#include "sched/all_to_all.h"
#include "sched/halving_doubling.h"
#include "sched/ring.h"
#include "tests/sched/pattern_schedule.h"
#include "topo/generators.h"

namespace topocoll::sched {
namespace {

using topo::Topology;

// bigraph-32 defaults: 100 Gb/s = 12,500 bytes/us per link, 1 us per link, 0.5 us per switch.
// Rank 0 (U0) -> rank 1 (L0): NIC, U0->L0, NIC: 3 links + 2 switches = 4 us of latency.
TEST(CostModel, OneFlowAcrossTheGroups) {
  Topology t = topo::generate_bigraph(topo::BiGraphShape{});
  Pattern one(1);
  one[0].pairs.emplace_back(0, 1);
  Schedule s = testing::pattern_schedule(32, one, 250000);  // 1e6 bytes of 4-byte elements
  RouteCache routes(t);
  CostParams params;
  params.alpha_us = 3;
  CostEstimate c = estimate_cost(s, first_endpoints(t, 32), 4, routes, params);
  ASSERT_EQ(c.steps.size(), 1u);
  EXPECT_NEAR(c.steps[0].transfer_us, 4.0 + 80.0, 1e-9);
  EXPECT_NEAR(c.total_us, 3.0 + 84.0, 1e-9);
  params.include_latency = false;
  EXPECT_NEAR(estimate_cost(s, first_endpoints(t, 32), 4, routes, params).total_us, 83.0, 1e-9);
}

TEST(CostModel, SharedLinkSplitsItsRate) {
  Topology t = topo::generate_bigraph(topo::BiGraphShape{});
  // 0 -> 1 and 2 -> 3 both cross U0 -> L0.
  Schedule s;
  s.nranks = 32;
  s.programs.resize(32);
  for (auto& p : s.programs) p.step_begin = {0};
  auto send = [&](int a, int b, int64_t n) {
    Op op;
    op.kind = OpKind::Send;
    op.peer = b;
    op.count = n;
    s.programs[a].ops.push_back(op);
  };
  send(0, 1, 1000000);  // bytes with elem_size 1
  send(2, 3, 250000);
  for (auto& p : s.programs) p.step_begin.push_back(uint32_t(p.ops.size()));
  RouteCache routes(t);
  CostParams params;
  params.alpha_us = 0;
  params.include_latency = false;
  CostEstimate c = estimate_cost(s, first_endpoints(t, 32), 1, routes, params);
  // The link drains 1.25e6 bytes: the large flow ends at 100 us; the small one, sharing
  // half the rate, after 2 x 0.25e6 bytes = 40 us.
  EXPECT_NEAR(c.total_us, 100.0, 1e-9);
  EXPECT_EQ(c.steps[0].slowest_flow_src, 0);
}

// A host transport pays per message: the busiest rank's sends plus receives in a step.
TEST(CostModel, PerMessageOverheadCountsTheBusiestRank) {
  Topology t = topo::generate_bigraph(topo::BiGraphShape{});
  Pattern fan(1);
  for (int peer : {1, 2, 3}) fan[0].pairs.emplace_back(0, peer);  // rank 0: 3 sends
  fan[0].pairs.emplace_back(4, 1);                                 // rank 1: 2 receives
  Schedule s = testing::pattern_schedule(32, fan, 1);
  RouteCache routes(t);
  CostParams params;
  params.alpha_us = 2;
  params.include_latency = false;
  const double without = estimate_cost(s, first_endpoints(t, 32), 4, routes, params).total_us;
  params.alpha_message_us = 10;
  const CostEstimate with = estimate_cost(s, first_endpoints(t, 32), 4, routes, params);
  EXPECT_NEAR(with.steps[0].message_us, 30.0, 1e-9);
  // The messages' CPU time overlaps the wire: the step takes the longer of the two.
  EXPECT_NEAR(with.total_us, 2 + std::max(30.0, with.steps[0].transfer_us), 1e-9);
  EXPECT_NEAR(with.total_us - without, 30.0 - with.steps[0].transfer_us, 1e-9);
  // A step whose bytes take longer than its messages' handling costs only the wire.
  Schedule big = testing::pattern_schedule(32, fan, 1 << 20);
  const double big_without = estimate_cost(big, first_endpoints(t, 32), 4, routes, [&] {
    CostParams p = params;
    p.alpha_message_us = 0;
    return p;
  }()).total_us;
  EXPECT_NEAR(estimate_cost(big, first_endpoints(t, 32), 4, routes, params).total_us, big_without, 1e-9);
}

TEST(CostModel, ReductionAndStriping) {
  topo::NapShape shape;
  shape.packages = 4;
  shape.nodes_per_package = 4;
  shape.local_switches = 2;
  shape.torus = {2, 2};
  Topology t = topo::generate_nap(shape);
  Pattern one(1);
  one[0].pairs.emplace_back(0, 1);
  Schedule s = testing::pattern_schedule(16, one, 250000);  // 1e6 bytes
  // Rank 1 reduces 1000 floats of two inputs: 8000 bytes read.
  Op red;
  red.kind = OpKind::Reduce;
  red.nsrc = 2;
  red.count = 1000;
  s.programs[1].ops.push_back(red);
  s.programs[1].step_begin.back() = uint32_t(s.programs[1].ops.size());
  RouteCache routes(t);
  CostParams params;
  params.alpha_us = 2;
  params.gamma_us_per_byte = 1e-3;
  CostEstimate c = estimate_cost(s, first_endpoints(t, 16), 4, routes, params);
  // Striped over 2 local switches at 512 Gb/s = 64,000 bytes/us: 5e5 bytes per path
  // = 7.8125 us; latency 2 x 0.09 + 0.005 switch.
  EXPECT_NEAR(c.steps[0].transfer_us, 7.8125 + 0.185, 1e-9);
  EXPECT_NEAR(c.steps[0].reduce_us, 8.0, 1e-9);
  EXPECT_NEAR(c.total_us, 2 + 7.8125 + 0.185 + 8.0, 1e-9);
}

TEST(CostModel, EmptyStepsAreFree) {
  Topology t = topo::generate_bigraph(topo::BiGraphShape{});
  Schedule s = testing::pattern_schedule(32, Pattern(3), 1);
  RouteCache routes(t);
  EXPECT_DOUBLE_EQ(estimate_cost(s, first_endpoints(t, 32), 4, routes).total_us, 0.0);
}

// The planner takes its link loads from analyze_schedule, the reports from
// analyze_link_load: one per-step loop, so the same numbers, on single-path BiGraph routes
// and striped NAP ones, with a fresh route cache (routes added mid-step) and a warm one.
TEST(CostModel, ReportsTheLinkLoadsOfTheContentionAnalysis) {
  for (const Topology& t : {topo::generate_bigraph(topo::BiGraphShape{}),
                            topo::generate_nap(topo::NapShape{})}) {
    const int n = int(t.endpoints().size());
    std::vector<int> reversed(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) reversed[size_t(r)] = n - 1 - r;
    for (const Schedule& s : {hd_allreduce(n, 4096, reversed), ring_allreduce(n, 1000),
                              direct_all_to_all(n, 100)}) {
      SCOPED_TRACE(t.name() + " " + s.algo);
      const Placement p = first_endpoints(t, n);
      RouteCache fresh(t), warm(t);
      const LinkLoad want = analyze_link_load(s, p, 4, warm);
      for (RouteCache* routes : {&fresh, &warm}) {
        const LinkLoad got = analyze_schedule(s, p, 4, *routes).load;
        ASSERT_EQ(got.steps.size(), want.steps.size());
        EXPECT_EQ(got.max_load, want.max_load);
        EXPECT_EQ(got.worst_step, want.worst_step);
        EXPECT_EQ(got.total_hops, want.total_hops);
        for (size_t i = 0; i < want.steps.size(); ++i) {
          const StepLoad &a = got.steps[i], &b = want.steps[i];
          EXPECT_EQ(a.flows, b.flows) << "step " << i;
          EXPECT_EQ(a.bytes, b.bytes) << "step " << i;
          EXPECT_EQ(a.max_flow_bytes, b.max_flow_bytes) << "step " << i;
          EXPECT_EQ(a.max_load, b.max_load) << "step " << i;
          EXPECT_EQ(a.bottleneck_link, b.bottleneck_link) << "step " << i;
          EXPECT_EQ(a.hops, b.hops) << "step " << i;
          ASSERT_EQ(a.links.size(), b.links.size()) << "step " << i;
          for (size_t k = 0; k < a.links.size(); ++k) {
            EXPECT_EQ(a.links[k].link, b.links[k].link);
            EXPECT_EQ(a.links[k].flows, b.links[k].flows);
            EXPECT_EQ(a.links[k].bytes, b.links[k].bytes);
          }
        }
      }
      // A cold cache routes pairs mid-step; the times must not depend on it either.
      RouteCache cold(t);
      EXPECT_EQ(estimate_cost(s, p, 4, cold).total_us, estimate_cost(s, p, 4, warm).total_us);
    }
  }
}

}  // namespace
}  // namespace topocoll::sched
