// The acceptance report: its JSON carries the documented keys (docs/acceptance.md), every
// finding appears with its phase, and the drawing colours each failing cable.
#include <gtest/gtest.h>

#include <set>

#include "accept/acceptance_report.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"

namespace topocoll::accept {
namespace {

TEST(AcceptanceReport, FindingsOfEveryPhaseReachTheJsonTextAndDrawing) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
  AcceptanceResult r;
  r.topology_file = "bigraph-32.json";
  r.budget_s = 60;
  r.ranks = 31;
  r.inventory.problems.push_back({"missing", -1, 31, "s31.g0 (s31 GPU 0) has no rank in the job"});
  r.inventory.missing = {31};
  const int slow = topo::find_cable(t, "U1->L2").link;
  const int swapped_a = topo::find_cable(t, "U0->L0").link, swapped_b = topo::find_cable(t, "U0->L1").link;
  r.localization.links.resize(t.links().size());
  for (const auto& l : t.links()) {
    r.localization.links[l.id].link = l.id;
    r.localization.links[l.id].flows = 3;
    r.localization.links[l.id].cleared = 0.99;
    r.localization.links[l.id].state = CableState::Ok;
  }
  r.localization.links[slow].cleared = 0.25;
  r.localization.links[slow].state = CableState::Slow;
  r.localization.findings.push_back({"slow cable", {slow}, {}, 0.25, "certain", "U1->L2: flows across it reached 25 %"});
  r.wiring.findings.push_back({{swapped_a, swapped_b}, "U0-L0 and U0-L1 look swapped", 4});
  r.phases = {{"inventory", "fail", "1 missing"}, {"cables", "fail", "1 slow"}, {"wiring", "fail", "1 miswired"},
              {"collectives", "skipped", "inventory problems"}};
  CollectiveCheck c;
  c.algo = "ring";
  c.collective = "allreduce";
  c.error = "rank 3: no progress";
  r.collectives.push_back(c);

  const auto j = report_json(t, r);
  for (const char* key : {"schema", "verdict", "topology", "started", "duration_s", "budget_s", "threshold", "phases",
                          "inventory", "cables", "flows", "findings", "wiring", "interference", "collectives"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["schema"], "topocoll-accept/1");
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_EQ(j["cables"].size(), 96u);
  std::map<std::string, std::string> state;
  for (const auto& c : j["cables"]) state[c["direction"]] = c["state"];
  EXPECT_EQ(state["U1->L2"], "slow");
  EXPECT_EQ(state["U0->L0"], "miswired");
  EXPECT_EQ(state["L3->U3"], "ok");
  std::set<std::string> phases;
  for (const auto& f : j["findings"]) phases.insert(f["phase"].get<std::string>() + "/" + f["kind"].get<std::string>());
  EXPECT_EQ(phases, (std::set<std::string>{"inventory/missing", "cables/slow cable", "wiring/miswired", "collectives/failed"}));

  const std::string text = report_text(t, r);
  EXPECT_NE(text.find("verdict: FAIL"), std::string::npos);
  EXPECT_NE(text.find("look swapped"), std::string::npos);
  EXPECT_NE(text.find("fix the wiring first"), std::string::npos);

  const std::string dot = report_dot(t, r);
  EXPECT_NE(dot.find("\"U1\" -- \"L2\" [color=\"#ff7f0e\""), std::string::npos);
  EXPECT_NE(dot.find("\"U0\" -- \"L0\" [color=\"#8e44ad\""), std::string::npos);
  EXPECT_NE(dot.find("s31.g0\\n(no rank)"), std::string::npos);
}

TEST(AcceptanceReport, ABudgetCutPhaseMakesTheRunIncompleteNotAPass) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
  AcceptanceResult r;
  r.phases = {{"inventory", "pass", "32 ranks"}, {"cables", "incomplete", "the budget allowed 1 of 5 rounds"},
              {"wiring", "skipped", "not asked for"}};
  EXPECT_EQ(r.verdict(), "incomplete");
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(report_json(t, r)["verdict"], "incomplete");
  EXPECT_NE(report_text(t, r).find("verdict: INCOMPLETE"), std::string::npos);
  r.phases.push_back({"collectives", "fail", "1 wrong"});
  EXPECT_EQ(r.verdict(), "fail");  // a failure found outweighs what was left out
  r.phases.pop_back();
  r.phases[1].status = "pass";
  EXPECT_EQ(r.verdict(), "pass");
  r.aborted = "rank 3: gone";
  EXPECT_EQ(r.verdict(), "fail");
}

TEST(AcceptanceReport, AFlowSlowAloneIsASlowPathFindingNotAnUnexplainedOne) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json");
  AcceptanceResult r;
  r.threshold = 0.8;
  r.localization.links.resize(t.links().size());
  FlowMeasurement m;
  m.flow.src = 0;
  m.flow.dst = 5;
  m.flow.links = {topo::find_cable(t, "U1->L2").link};
  m.expected_gbps = 1;
  m.measured_gbps = 0.4;
  r.localization.findings.push_back({"unexplained", m.flow.links, {0, 5}, 0.4, "unknown", "slow, every cable cleared"});
  FlowMeasurement alone = m;
  alone.measured_gbps = 0.45;
  r.interference.push_back({m, alone, {}, false});
  r.phases = {{"wiring", "fail", "1 slow alone too"}};
  const auto j = report_json(t, r);
  std::set<std::string> kinds;
  for (const auto& f : j["findings"]) kinds.insert(f["phase"].get<std::string>() + "/" + f["kind"].get<std::string>());
  EXPECT_EQ(kinds, (std::set<std::string>{"wiring/slow path"}));
  EXPECT_EQ(j["interference"][0]["slow_alone"], true);
  EXPECT_NE(report_text(t, r).find("45 % alone"), std::string::npos) << report_text(t, r);
}

}  // namespace
}  // namespace topocoll::accept
