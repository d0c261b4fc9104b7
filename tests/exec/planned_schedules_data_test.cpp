// The schedules the planner serves (sched/plan.h: every algorithm of the registry, with the
// order and grouping a topology gives it) run with real data on the host backend. The
// generator suites build each algorithm without a topology (rank order; hier and hier-hd
// with one rank per group); here hier groups are packages and multi-GPU hosts, HD runs in
// its searched order, rings in the topology's, at rank counts that are not powers of two,
// uneven counts, in and out of place, every datatype and op.
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>

#include "exec/collective_check.h"
#include "sched/algorithm_registry.h"
#include "sched/plan.h"
#include "tests/exec/thread_group.h"
#include "topo/generators.h"
#include "topo/topology_json.h"

namespace topocoll::exec::testing {
namespace {

struct TopologyCase {
  std::string name;
  topo::Topology topology;
  std::vector<int> rank_counts;
  std::set<std::string> two_level;  // the hier schedules that must apply (groups of several ranks)
};

std::vector<TopologyCase> topologies() {
  std::vector<TopologyCase> all;
  all.push_back({"bigraph-32", topo::load_topology_file(TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json"), {5, 6, 12}, {}});
  all.push_back({"nap-4x8", topo::load_topology_file(TOPOCOLL_SOURCE_DIR "/examples/nap-4x8.json"), {6, 12}, {}});
  // Packages of 2 on a non-square 3x2 torus, of 3 on a 2x2 torus: hier's groups are packages.
  for (auto [nodes, torus] : {std::pair{2, std::vector<int>{3, 2}}, std::pair{3, std::vector<int>{2, 2}}}) {
    topo::NapShape shape;
    shape.nodes_per_package = nodes;
    shape.local_switches = 2;
    shape.torus = torus;
    shape.packages = torus[0] * torus[1];
    const int p = nodes * shape.packages;
    all.push_back({"nap-" + std::to_string(shape.packages) + "x" + std::to_string(nodes), topo::generate_nap(shape),
                   {p}, {"hier", "hier-hd"}});
  }
  // Hosts of 3 and 4 GPUs: hier's groups are hosts (sched/hier_grouping.h).
  for (int gpus : {3, 4}) {
    topo::BiGraphShape shape;
    shape.switches_per_group = 2;
    shape.endpoints_per_switch = 6;
    shape.gpus_per_server = gpus;
    all.push_back({"bigraph-" + std::to_string(gpus) + "gpu", topo::generate_bigraph(shape), {gpus * 2, gpus * 3},
                   {"hier"}});
  }
  return all;
}

// nccl-tests' size for `count` elements per NCCL call (sched::PlanRequest::bytes).
int64_t request_bytes(sched::Collective c, int64_t count, int nranks, std::size_t elem) {
  const bool whole = c == sched::Collective::ReduceScatter || c == sched::Collective::AllGather ||
                     c == sched::Collective::AllToAll;
  return count * int64_t(elem) * (whole ? nranks : 1);
}

// Plans `algo` for the case and checks the served schedule's results against the exact
// reference; false when the planner refuses the shape (an algorithm that does not apply).
bool plan_and_check(const topo::Topology& t, const std::string& algo, const CollectiveCase& c) {
  sched::PlanRequest request;
  request.collective = c.collective;
  request.algo = algo;
  request.nranks = c.nranks;
  request.elem_size = c.elem();
  request.bytes = request_bytes(c.collective, c.count, c.nranks, c.elem());
  sched::Plan plan;
  try {
    plan = sched::make_plan(t, request);
  } catch (const std::invalid_argument&) {
    return false;
  }
  SCOPED_TRACE(t.name() + " " + algo + " " + c.describe());
  EXPECT_EQ(sched::plan_count(request, c.nranks), c.count);
  EXPECT_TRUE(plan.verified) << plan.verification;
  std::vector<std::vector<unsigned char>> inputs(std::size_t(c.nranks));
  for (int r = 0; r < c.nranks; ++r) inputs[std::size_t(r)] = c.input(r);
  const auto outputs = run_on_threads(c, plan.schedule, inputs);
  for (int r = 0; r < c.nranks; ++r) {
    const auto want = c.reference(r, inputs);
    EXPECT_EQ(outputs[std::size_t(r)].size(), want.size()) << "rank " << r;
    EXPECT_TRUE(outputs[std::size_t(r)] == want) << "rank " << r << " differs from the reference";
  }
  return true;
}

TEST(PlannedSchedulesWithData, EveryAlgorithmInItsTopologysOrderAndGrouping) {
  for (const TopologyCase& tc : topologies()) {
    int served = 0;
    std::set<std::string> hier_served;
    for (sched::Collective collective : sched::kCollectives)
      for (const sched::Algorithm& a : sched::algorithms()) {
        if (!a.collectives.contains(collective)) continue;
        for (int p : tc.rank_counts)
          for (int variant = 0; variant < 4; ++variant) {
            CollectiveCase c;
            c.collective = collective;
            c.nranks = p;
            c.count = 7 * p + 5 + variant;  // uneven: not a multiple of P
            c.dtype = std::array{DataType::Float32, DataType::Bfloat16, DataType::Int8, DataType::Float64}[variant];
            c.op = std::array{ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Prod}[variant];
            c.in_place = collective != Collective::AllToAll && variant % 2 == 1;
            if (!plan_and_check(tc.topology, std::string(a.name), c)) break;  // refused at this P
            ++served;
            if (std::string(a.name).rfind("hier", 0) == 0) hier_served.insert(std::string(a.name));
            if (::testing::Test::HasFailure()) return;
          }
      }
    EXPECT_GT(served, 0) << tc.name;
    // Grouped by packages or hosts: the two-level schedules ran with groups of several ranks.
    for (const std::string& name : tc.two_level) EXPECT_TRUE(hier_served.count(name)) << tc.name << ": " << name;
  }
}

}  // namespace
}  // namespace topocoll::exec::testing
