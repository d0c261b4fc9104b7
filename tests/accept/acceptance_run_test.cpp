// run_acceptance in one process: two ranks, threads on loopback, standing for the two GPUs
// of one server of bigraph-32 (renamed after this machine). Each rank's budget clock starts
// when it does, so ranks see different budgets left; every decision that steers the group
// (run a phase or skip it, a collective's size) must still be taken alike on every rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "accept/acceptance_run.h"
#include "accept/report_files.h"
#include "exec/external_program.h"
#include "topo/topology_json.h"
#include "tests/common/scratch_dir.h"

namespace topocoll::accept {
namespace {

namespace fs = std::filesystem;
using testing_support::ScratchDir;

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

// bigraph-32 with s0 renamed after this host and given a second GPU, on s1's port of L0.
topo::Topology two_gpus_here() {
  auto doc = nlohmann::json::parse(std::ifstream(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json"));
  auto& s0 = doc["servers"][0];
  s0["name"] = this_host();
  s0["nics"].push_back({{"name", "nic1"}, {"gpu", 1}, {"switch", "L0"}});
  doc["servers"].erase(1);  // s1, whose port on L0 the second NIC takes
  const ScratchDir scratch("acceptance_two_gpus");
  const std::string path = scratch.file("two-gpus.json");
  std::ofstream(path) << doc.dump();
  return topo::load_topology_file(path);
}

struct RankRun {
  int status = -1;
  std::string error;
};

// Runs both ranks with their own budgets; returns rank 0's progress lines.
std::vector<std::string> run_two_ranks(const std::vector<double>& budgets, std::vector<RankRun>* runs,
                                       double alpha_us = 0) {
  const topo::Topology t = two_gpus_here();
  exec::BootstrapRoot root({"127.0.0.1", 0}, 2, std::chrono::seconds(30));
  std::vector<std::string> lines;
  std::mutex mutex;
  runs->assign(2, {});
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      try {
        AcceptanceOptions o;
        o.topology = t;
        o.topology_file = "two GPUs here";
        o.expected_endpoints = {*t.find_endpoint(this_host(), 0), *t.find_endpoint(this_host(), 1)};
        o.budget_s = budgets[r];
        o.phases = {"inventory", "collectives"};
        o.bind = "127.0.0.1";
        o.gpu = r;
        if (alpha_us > 0) o.cost.alpha_us = alpha_us;
        exec::BootstrapClient group({"127.0.0.1", root.port()}, r, 2, std::chrono::seconds(30));
        (*runs)[r].status = run_acceptance(o, group, [&](const std::string& line) {
          std::lock_guard lock(mutex);
          lines.push_back(line);
        });
      } catch (const std::exception& e) {
        (*runs)[r].error = e.what();
      }
    });
  for (auto& th : ranks) th.join();
  return lines;
}

// One rank alone, the inventory only, writing its report to `report_dir`.
RankRun run_one_rank_with_report(const std::string& report_dir, std::vector<std::string>* lines) {
  const topo::Topology t = two_gpus_here();
  exec::BootstrapRoot root({"127.0.0.1", 0}, 1, std::chrono::seconds(30));
  RankRun run;
  try {
    AcceptanceOptions o;
    o.topology = t;
    o.topology_file = "two GPUs here";
    o.expected_endpoints = {*t.find_endpoint(this_host(), 0)};
    o.budget_s = 30;
    o.phases = {"inventory"};
    o.bind = "127.0.0.1";
    o.report_dir = report_dir;
    exec::BootstrapClient group({"127.0.0.1", root.port()}, 0, 1, std::chrono::seconds(30));
    run.status = run_acceptance(o, group, [&](const std::string& line) { lines->push_back(line); });
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  return run;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

TEST(AcceptanceRun, ARankWithTooLittleBudgetLeftLeavesTheCollectivesOutForEveryRank) {
  // Rank 0 has less than the collectives' 10 s minimum left, rank 1 plenty: neither runs
  // them, and the run is incomplete, not a pass (exit 2 at rank 0, which reports it).
  std::vector<RankRun> runs;
  const auto lines = run_two_ranks({8, 120}, &runs);
  const std::string out = joined(lines);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(runs[r].error, "") << "rank " << r << "\n" << out;
  EXPECT_EQ(runs[0].status, 2) << out;
  EXPECT_EQ(runs[1].status, 0) << out;
  EXPECT_NE(out.find("[collectives] not run: the budget is spent  INCOMPLETE"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: INCOMPLETE"), std::string::npos) << out;
  EXPECT_EQ(out.find("ms measured"), std::string::npos) << out;
}

TEST(AcceptanceRun, RanksWithDifferentBudgetsRunTheSameCollectivesAndCheckThem) {
  // A per-step cost of 0.5 s in the model (the loopback run itself is fast): a case's size is
  // halved until its prediction fits the budget's share, which for rank 0 alone would mean
  // the smallest size and for rank 1 alone the largest. Both must plan the same.
  std::vector<RankRun> runs;
  const auto lines = run_two_ranks({30, 300}, &runs, 5e5);
  const std::string out = joined(lines);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(runs[r].error, "") << "rank " << r << "\n" << out;
    EXPECT_EQ(runs[r].status, 0) << "rank " << r << "\n" << out;
  }
  EXPECT_NE(out.find("[collectives] "), std::string::npos) << out;
  EXPECT_EQ(out.find("[collectives] skipped"), std::string::npos) << out;
  // Sized by the least budget left (rank 0's): the smallest size.
  EXPECT_NE(out.find("allreduce ring 65536 B: "), std::string::npos) << out;
  int checked = 0;
  for (const auto& line : lines)
    if (line.find(" ms measured, ") != std::string::npos) {  // one per collective run
      ++checked;
      EXPECT_NE(line.find(" ms predicted, 0 wrong"), std::string::npos) << line;
    }
  EXPECT_GE(checked, 3) << out;
  EXPECT_EQ(out.find("planned a different"), std::string::npos) << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
}

TEST(AcceptanceReport, AQuoteInTheReportPathIsAFileNameNotShellSyntax) {
  // The path reached `sh -c` inside single quotes: this one ended the quote and ran touch.
  const ScratchDir scratch("accept_report_quote");
  const fs::path base = scratch.path();
  const fs::path pwned = base / "PWNED";
  const std::string dir = (base / "r';touch PWNED;'").string();
  const fs::path cwd = fs::current_path();
  fs::current_path(base);  // where a shell would have run the touch
  std::vector<std::string> lines;
  const RankRun run = run_one_rank_with_report(dir, &lines);
  fs::current_path(cwd);
  EXPECT_EQ(run.error, "") << joined(lines);
  EXPECT_FALSE(fs::exists(pwned)) << "a command in the report path ran";
  EXPECT_TRUE(fs::exists(fs::path(dir) / "report.json")) << joined(lines);
  // With a quote in its path the picture is still drawn where Graphviz is installed.
  if (exec::run_program({"dot", "-V"}).succeeded()) {
    EXPECT_TRUE(fs::exists(fs::path(dir) / "topology.png")) << joined(lines);
    EXPECT_EQ(joined(lines).find("Graphviz's dot failed"), std::string::npos) << joined(lines);
  }
}

TEST(AcceptanceReport, EveryMissingDirectoryOfTheReportPathIsCreated) {
  const ScratchDir scratch("accept_report_deep");
  const fs::path base = scratch.path();
  const fs::path dir = base / "nonexist" / "deeper";
  std::vector<std::string> lines;
  const RankRun run = run_one_rank_with_report(dir.string(), &lines);
  EXPECT_EQ(run.error, "") << joined(lines);
  EXPECT_TRUE(fs::exists(dir / "report.json")) << joined(lines);
  EXPECT_TRUE(fs::exists(dir / "report.txt")) << joined(lines);
  EXPECT_TRUE(fs::exists(dir / "topology.dot")) << joined(lines);
}

TEST(AcceptanceReport, ALinkPlantedAtAReportFileIsReplacedNotWrittenThrough) {
  // Run as root into a directory others may write: links at the report's names must not
  // make it overwrite their targets.
  const ScratchDir scratch("accept_report_links");
  const fs::path dir = fs::path(scratch.path()) / "report", victim = fs::path(scratch.path()) / "victim";
  fs::create_directories(dir);
  { std::ofstream(victim) << "precious\n"; }
  for (const char* name : {"report.json", "report.txt", "topology.dot", "topology.png"})
    fs::create_symlink(victim, dir / name);
  const WrittenReport w = write_report_files(dir.string(), "{}\n", "verdict: PASS\n", "graph {}\n");
  std::ifstream in(victim);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "precious\n");
  for (const char* name : {"report.json", "report.txt", "topology.dot"})
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / name))) << name;
  if (w.drawn) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dir / "topology.png")));
  }
  for (const auto& entry : fs::directory_iterator(dir))  // no temporary or probe file left
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST(AcceptanceReport, AReportThatCannotBeWrittenFailsTheRunSayingWhy) {
  for (const std::string& dir : {std::string("/proc/x"), std::string("/dev/null/report")}) {
    std::vector<std::string> lines;
    const RankRun run = run_one_rank_with_report(dir, &lines);
    const std::string out = joined(lines);
    EXPECT_EQ(run.error, "") << out;
    EXPECT_NE(run.status, 0) << "a run whose report was lost passed\n" << out;
    EXPECT_NE(out.find("report: NOT written: cannot create "), std::string::npos) << out;
    EXPECT_EQ(out.find(dir + "/report.json, report.txt"), std::string::npos) << "claims a report it did not write\n" << out;
  }
  EXPECT_THROW(prepare_report_dir("/proc/x"), ReportError);
}

}  // namespace
}  // namespace topocoll::accept
