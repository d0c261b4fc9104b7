// The algorithm registry (sched/algorithm_registry.h): what it holds, and that every list is
// it. The sweep plans every registered algorithm for every collective on topologies where
// the rules differ (single- and multi-GPU BiGraph hosts, full and partial NAP packages): the
// registry's refusal decides, by itself, whether the planner refuses (with that reason) or
// plans a verified schedule. A new algorithm is swept with no edit here.
#include "sched/algorithm_registry.h"

#include <gtest/gtest.h>

#include <climits>
#include <set>
#include <stdexcept>
#include <string>

#include "config/algorithm_names.h"
#include "sched/plan.h"
#include "topo/topology_json.h"

namespace topocoll::sched {
namespace {

TEST(AlgorithmRegistry, HoldsEachNameOnceInListOrder) {
  ASSERT_FALSE(algorithms().empty());
  std::set<std::string_view> names;
  int position = INT_MIN;
  for (const Algorithm& a : algorithms()) {
    EXPECT_TRUE(names.insert(a.name).second) << a.name;
    EXPECT_GT(a.list_position, position) << a.name;
    position = a.list_position;
    EXPECT_FALSE(a.summary.empty()) << a.name;
    EXPECT_FALSE(a.collectives.empty()) << a.name;
    EXPECT_NE(a.build, nullptr) << a.name;
    for (Collective c : kCollectives)
      EXPECT_TRUE(!a.auto_collectives.contains(c) || a.collectives.contains(c)) << a.name;
    EXPECT_EQ(find_algorithm(a.name), &a);
  }
  EXPECT_EQ(find_algorithm("auto"), nullptr);
  EXPECT_EQ(find_algorithm("nonsense"), nullptr);
}

// The names mean one thing: `ring` the rank-order ring, `ring-topo` the topology-ordered one.
TEST(AlgorithmRegistry, RingIsRankOrderAndRingTopoTopologyOrder) {
  const Algorithm* ring = find_algorithm("ring");
  const Algorithm* ring_topo = find_algorithm("ring-topo");
  ASSERT_NE(ring, nullptr);
  ASSERT_NE(ring_topo, nullptr);
  EXPECT_EQ(ring->order, nullptr);
  EXPECT_NE(ring_topo->order, nullptr);
  const topo::Topology t = topo::load_topology_file(TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json");
  PlanRequest req;
  req.bytes = 1 << 20;
  req.verify = false;
  req.algo = "ring";
  const Plan rank_order = make_plan(t, req);
  for (int i = 0; i < int(rank_order.order.size()); ++i) EXPECT_EQ(rank_order.order[i], i);
  req.algo = "ring-topo";
  EXPECT_NE(make_plan(t, req).order, rank_order.order);
}

// TOPOCOLL_ALGO (config/algorithm_names.h) accepts the interposer's routes, then exactly the
// registry's names in its order: config/ is told at registration.
TEST(AlgorithmRegistry, TopocollAlgoNamesAreTheRoutesThenTheRegistry) {
  std::vector<std::string_view> expected(config::route_names().begin(), config::route_names().end());
  for (const Algorithm& a : algorithms()) expected.push_back(a.name);
  const auto names = config::algorithm_names();
  EXPECT_EQ(std::vector<std::string_view>(names.begin(), names.end()), expected);
}

TEST(AlgorithmRegistry, ListsAndAbbreviations) {
  std::string all;
  for (const Algorithm& a : algorithms()) all += (all.empty() ? "" : ", ") + std::string(a.name);
  EXPECT_EQ(algorithm_list(), all);
  EXPECT_EQ(algorithm_list(Collective::AllToAll).find("hd"), std::string::npos);
  EXPECT_NE(algorithm_list(Collective::AllToAll).find("direct"), std::string::npos);
  EXPECT_EQ(abbreviations(kEveryCollective), "AR, RS, AG, A2A");
  EXPECT_EQ(abbreviations({Collective::AllGather, Collective::AllReduce}), "AR, AG");
  EXPECT_EQ(abbreviations({}), "-");
}

TEST(AlgorithmRegistry, RefusalsNameTheReason) {
  const Algorithm& hd = *find_algorithm("hd");
  EXPECT_EQ(refusal(hd, {.collective = Collective::AllToAll, .nranks = 4}),
            "no alltoall schedule (alltoall: " + algorithm_list(Collective::AllToAll) + ")");
  EXPECT_NE(refusal(hd, {.collective = Collective::AllReduce, .nranks = 0}), "");
  EXPECT_EQ(refusal(hd, {.collective = Collective::AllReduce, .nranks = 5}), "");
  EXPECT_NE(refusal(*find_algorithm("ring"), {.collective = Collective::AllReduce, .nranks = 2048}), "");
  EXPECT_NE(auto_refusal(*find_algorithm("ring"), {.collective = Collective::AllReduce, .nranks = 600}), "");
  EXPECT_NE(auto_refusal(*find_algorithm("hd-naive"), {.collective = Collective::AllReduce, .nranks = 8}), "");
  try {
    build_schedule(hd, {.shape = {.collective = Collective::AllToAll, .nranks = 4}, .count = 8});
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "hd: " + refusal(hd, {.collective = Collective::AllToAll, .nranks = 4}));
  }
}

TEST(AlgorithmRegistry, ASecondEntryOfANameOrARouteNameIsRefused) {
  Algorithm copy = algorithms().front();
  copy.list_position = 1 << 30;
  EXPECT_THROW(register_algorithm(copy), std::logic_error);
  copy.name = "nccl";
  EXPECT_THROW(register_algorithm(copy), std::logic_error);
  copy.name = "butterfly";
  copy.auto_collectives = kEveryCollective;
  copy.collectives = {Collective::AllReduce};
  EXPECT_THROW(register_algorithm(copy), std::logic_error);
  EXPECT_EQ(find_algorithm("butterfly"), nullptr);
}

struct Shape {
  const char* file;
  int nranks;  // the first endpoints; 0: all
};

TEST(AlgorithmRegistry, ThePlannerRefusesExactlyWhatTheRegistryRefuses) {
  for (const Shape& shape : {Shape{"bigraph-32.json", 0}, Shape{"bigraph-32.json", 12},
                             Shape{"bigraph-16x8.json", 16}, Shape{"nap-4x8.json", 0},
                             Shape{"nap-4x8.json", 12}}) {
    const topo::Topology t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR "/examples/") + shape.file);
    for (const Algorithm& a : algorithms())
      for (Collective c : kCollectives) {
        SCOPED_TRACE(std::string(shape.file) + " " + std::to_string(shape.nranks) + " ranks, " +
                     std::string(a.name) + " " + std::string(to_string(c)));
        PlanRequest req;
        req.collective = c;
        req.algo = std::string(a.name);
        req.bytes = 1 << 16;
        req.nranks = shape.nranks;
        const Placement placement = first_endpoints(t, shape.nranks > 0 ? shape.nranks : int(t.endpoints().size()));
        const std::string why =
            refusal(a, {.collective = c, .nranks = placement.nranks(), .topology = &t, .placement = &placement});
        if (why.empty()) {
          const Plan plan = make_plan(t, req);
          EXPECT_EQ(plan.algo, a.name);
          EXPECT_TRUE(plan.verified) << plan.verification;
        } else {
          try {
            make_plan(t, req);
            ADD_FAILURE() << "planned what the registry refuses: " << why;
          } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(std::string(a.name) + ": " + why), std::string::npos) << e.what();
          }
        }
      }
  }
}

}  // namespace
}  // namespace topocoll::sched
