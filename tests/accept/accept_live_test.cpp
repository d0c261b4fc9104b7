// `topocoll accept` on emulated fabrics with faults put in by `topocoll fabric` (ctest label
// `fabric`): a healthy BiGraph passes; a degraded inter-group cable, a cut access cable, two
// swapped cables, a rank missing from the job and a host the file does not know are each
// named — alone; the same on nap-4x8; a rank killed mid-run is reported and nothing hangs.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/common/fabric_fixture.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::testing_support {
namespace {

namespace fs = std::filesystem;

struct AcceptRun {
  int status = -1;
  std::string output;
  nlohmann::json report;
  bool drew_topology = false;  // topology.dot beside the report
  double seconds = 0;
};

AcceptRun accept(const std::string& args) {
  const ScratchDir scratch("accept_live_report");
  const std::string dir = scratch.file("report");
  const auto start = std::chrono::steady_clock::now();
  const auto r = shell_run(kCli + " accept " + args + " --report " + dir);
  AcceptRun a;
  a.status = r.status;
  a.output = r.output;
  a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(dir + "/report.json");
  if (in) a.report = nlohmann::json::parse(in);
  a.drew_topology = fs::exists(dir + "/topology.dot");
  return a;
}

// The findings of a report as "phase/kind: cables", for comparing whole sets. A flow slow
// once though all its cables were fast elsewhere ("unexplained": a busy machine) is
// information, not a finding about the network, and left out.
std::set<std::string> findings(const nlohmann::json& report) {
  std::set<std::string> out;
  for (const auto& f : report["findings"]) {
    if (f["kind"] == "unexplained") continue;
    std::string cables;
    for (const auto& c : f["cables"]) cables += (cables.empty() ? "" : " ") + c.get<std::string>();
    out.insert(f["phase"].get<std::string>() + "/" + f["kind"].get<std::string>() + ": " + cables);
  }
  return out;
}

std::string fault(const std::string& args) { return shell_run(kCli + " fabric " + args).output; }

TEST(AcceptLive, HealthyBiGraphPasses) {
  REQUIRE_FABRIC();
  FabricUp f("tahealthy", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  const auto a = accept("--fabric tahealthy" + budget(35));
  EXPECT_EQ(a.status, 0) << a.output;
  ASSERT_TRUE(a.report.is_object()) << a.output;
  EXPECT_EQ(a.report["verdict"], "pass");
  EXPECT_TRUE(findings(a.report).empty()) << a.report["findings"].dump(1);
  EXPECT_FALSE(a.report["collectives"].empty());
  for (const auto& c : a.report["collectives"]) EXPECT_EQ(c["wrong"], 0) << c.dump();
  for (const auto& c : a.report["cables"]) EXPECT_EQ(c["state"], "ok") << c.dump();
  EXPECT_GT(a.report["wiring"]["hops_answered"].get<int>(), 0);
}

TEST(AcceptLive, ADegradedInterGroupCableIsNamedAlone) {
  REQUIRE_FABRIC();
  FabricUp f("tadegrade", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  fault("degrade --name tadegrade U1-L2 --rate-mbit 5");  // a quarter of its rate
  const auto a = accept("--fabric tadegrade" + budget(20) + " --phases inventory,cables,wiring");
  EXPECT_EQ(a.status, 1) << a.output;
  EXPECT_EQ(findings(a.report), (std::set<std::string>{"cables/slow cable: U1->L2 L2->U1"})) << a.output;
  const auto& f0 = a.report["findings"][0];
  EXPECT_EQ(f0["certainty"], "certain");
  EXPECT_NEAR(f0["ratio"].get<double>(), 0.25, 0.08);
  EXPECT_TRUE(a.drew_topology);
}

TEST(AcceptLive, ACutAccessCableNamesItsEndpointWithoutHanging) {
  REQUIRE_FABRIC();
  FabricUp f("tacut", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  fault("cut --name tacut s9.g0-L1");
  const auto a = accept("--fabric tacut" + budget(20));
  EXPECT_EQ(a.status, 1) << a.output;
  EXPECT_LT(a.seconds, (20 + 30) * kTimeScale) << "the run must end within its budget";
  ASSERT_TRUE(a.report.is_object()) << a.output;
  bool named = false;
  for (const auto& x : a.report["findings"])
    if (x["kind"] == "unreachable endpoint" && x["endpoints"] == nlohmann::json::array({"s9.g0"})) named = true;
  EXPECT_TRUE(named) << a.report["findings"].dump(1);
  EXPECT_EQ(findings(a.report).size(), 1u) << a.report["findings"].dump(1);
  EXPECT_NE(a.output.find("[collectives] skipped"), std::string::npos);
}

// With an endpoint cut off the collectives phase is skipped, so no time is kept for it: the
// slow flows across a degraded cable are run again (before, the time kept for collectives
// that never ran starved the recheck, and a one-off slow flow stayed "certain").
TEST(AcceptLive, ACutEndpointLeavesTheRecheckOfASlowCableItsTime) {
  REQUIRE_FABRIC();
  FabricUp f("tacutslow", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  fault("cut --name tacutslow s9.g0-L1");
  fault("degrade --name tacutslow U1-L2 --rate-mbit 5");
  const auto a = accept("--fabric tacutslow" + budget(20));
  EXPECT_EQ(a.status, 1) << a.output;
  ASSERT_TRUE(a.report.is_object()) << a.output;
  EXPECT_EQ(findings(a.report), (std::set<std::string>{"cables/unreachable endpoint: s9.g0->L1 L1->s9.g0",
                                                       "cables/slow cable: U1->L2 L2->U1"}))
      << a.report["findings"].dump(1);
  EXPECT_FALSE(a.report["rechecks"].empty()) << a.output;
  EXPECT_NE(a.output.find("recheck: "), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("[collectives] skipped: dead cables or endpoints"), std::string::npos) << a.output;
}

TEST(AcceptLive, TwoSwappedCablesAreFlaggedAsWiring) {
  REQUIRE_FABRIC();
  FabricUp f("taswap", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  fault("swap --name taswap U0-L0 U0-L1");
  const auto a = accept("--fabric taswap" + budget(25) + " --phases inventory,cables,wiring");
  EXPECT_EQ(a.status, 1) << a.output;
  bool swap = false;
  for (const auto& x : a.report["findings"])
    if (x["phase"] == "wiring" && x["kind"] == "miswired") {
      EXPECT_EQ(x["cables"], nlohmann::json::array({"U0->L0", "U0->L1"})) << x.dump();
      EXPECT_NE(x["detail"].get<std::string>().find("look swapped"), std::string::npos);
      swap = true;
    }
  EXPECT_TRUE(swap) << a.output;
}

TEST(AcceptLive, AMissingRankAndAHostNotInTheFileAreNamed) {
  REQUIRE_FABRIC();
  FabricUp f("tainv", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  const auto short_job = accept("--fabric tainv --ranks 31" + budget(15) + " --phases inventory");
  EXPECT_EQ(short_job.status, 1) << short_job.output;
  EXPECT_EQ(findings(short_job.report), (std::set<std::string>{"inventory/missing: "}));
  EXPECT_NE(short_job.output.find("s31.g0 (s31 GPU 0) has no rank in the job"), std::string::npos);
  // The operator's file calls s31 "s99".
  auto doc = nlohmann::json::parse(std::ifstream(kExamples + "bigraph-32.json"));
  for (auto& s : doc["servers"])
    if (s["name"] == "s31") s["name"] = "s99";
  const ScratchDir scratch("accept_live_renamed");
  const std::string wrong = scratch.file("bigraph-32-renamed.json");
  std::ofstream(wrong) << doc.dump();
  const auto foreign = accept("--fabric tainv --topo " + wrong + budget(15) + " --phases inventory");
  EXPECT_EQ(foreign.status, 1) << foreign.output;
  EXPECT_NE(foreign.output.find("rank 31 runs on host 's31', which the topology does not list"), std::string::npos)
      << foreign.output;
  EXPECT_NE(foreign.output.find("s99.g0 (s99 GPU 0) has no rank in the job"), std::string::npos);
}

TEST(AcceptLive, NapFaultsAreNamedToo) {
  REQUIRE_FABRIC();
  FabricUp f("tanap", "nap-4x8.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  // A local switch port at a quarter of its rate and a dead torus cable, found together.
  fault("degrade --name tanap p1.n3-p1.s2 --rate-mbit 5");
  fault("cut --name tanap p0.n6-p2.n6");
  const auto a = accept("--fabric tanap" + budget(25) + " --phases inventory,cables,wiring");
  EXPECT_EQ(a.status, 1) << a.output;
  std::set<std::string> cable_findings;
  for (const auto& x : a.report["findings"])
    if (x["phase"] == "cables" && x["kind"] != "unexplained") {
      cable_findings.insert(x["kind"].get<std::string>() + ": " + x["cables"][0].get<std::string>());
      EXPECT_EQ(x["certainty"], "certain") << x.dump();
    }
  EXPECT_EQ(cable_findings, (std::set<std::string>{"slow cable: p1.n3->p1.s2", "dead cable: p0.n6->p2.n6"}))
      << a.output;
  fault("restore --name tanap");
  // A local switch whose ports to two nodes are swapped.
  fault("swap --name tanap p0.s0-p0.n0 p0.s0-p0.n1");
  const auto s = accept("--fabric tanap" + budget(25) + " --phases inventory,cables,wiring");
  bool swap = false;
  for (const auto& x : s.report["findings"])
    swap = swap || (x["kind"] == "miswired" && x["detail"].get<std::string>().find("look swapped") != std::string::npos);
  EXPECT_TRUE(swap) << s.output;
  fault("restore --name tanap");
  const auto m = accept("--fabric tanap --ranks 30" + budget(15) + " --phases inventory");
  EXPECT_NE(m.output.find("p3.n6 (p3.h6 GPU 0) has no rank"), std::string::npos) << m.output;
  EXPECT_NE(m.output.find("p3.n7 (p3.h7 GPU 0) has no rank"), std::string::npos) << m.output;
}

TEST(AcceptLive, ARankThatDiesIsReportedAndNothingHangs) {
  REQUIRE_FABRIC();
  FabricUp f("tadie", "bigraph-32.json", "20");
  ASSERT_TRUE(f.ok()) << f.output();
  const ScratchDir scratch("accept_live_die");
  const std::string log = scratch.file("accept.log");
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(shell_run("(" + kCli + " accept --fabric tadie" + budget(30) + " --phases inventory,cables > " + log +
                      " 2>&1; echo \"exit $?\" >> " + log + ") > /dev/null 2>&1 &").status, 0);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  // One rank (its process in s5's namespace) dies mid-run.
  const auto pids = shell_run("ip netns pids tf-tadie-s5").output;
  ASSERT_FALSE(pids.empty());
  ::kill(std::stoi(pids), SIGKILL);
  std::string text;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(90)) {
    std::ifstream in(log);
    text.assign(std::istreambuf_iterator<char>(in), {});
    if (text.find("exit ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_NE(text.find("exit "), std::string::npos) << "accept did not end after a rank died:\n" << text;
  EXPECT_EQ(text.find("exit 0"), std::string::npos) << text;
  EXPECT_NE(text.find("aborted: "), std::string::npos) << text;
}

}  // namespace
}  // namespace topocoll::testing_support
