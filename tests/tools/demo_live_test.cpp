// The demo on a live fabric (label `fabric`; root with network namespaces): its run step
// brings up fabric `demo`, measures every algorithm with every result checked, prints and
// writes the table and chart, and leaves no namespace, record, interface or rank process
// behind, also when Ctrl-C (SIGINT to its process group) or SIGTERM (to it alone) stops it
// mid-run. Timing is never checked here (the demo's figures are recorded in perf/results).
// The access check refuses a second demo and a fabric of its name already up.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "fabric/fabric_record.h"
#include "net/network_namespace.h"
#include "tests/common/fabric_fixture.h"
#include "tools/demo_fabric_access.h"

namespace topocoll::cli {
namespace {

namespace fs = std::filesystem;
using testing_support::kCli;
using testing_support::kExamples;
using testing_support::shell_run;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Interfaces of this machine's own namespace, by name.
std::set<std::string> host_interfaces() {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator("/sys/class/net")) out.insert(e.path().filename());
  return out;
}

// Processes whose command line runs a bench on fabric `demo`.
std::vector<int> demo_bench_processes() {
  std::vector<int> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp(e.path() / "cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(" bench --fabric demo ") != std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

class DemoOnFabric : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_FABRIC();
    if (fabric::load_record("demo") || !net::netns_with_prefix("tf-demo-").empty())
      GTEST_SKIP() << "a fabric named demo is up (someone's demo is running): not this test's to touch";
    dir_ = fs::path(::testing::TempDir()) / ("demo-live-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    interfaces_before_ = host_interfaces();
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string demo_command(const std::string& sizes, int iters) const {
    return kCli + " demo --topo " + kExamples + "bigraph-32.json --out " + (dir_ / "out").string() +
           " --sizes " + sizes + " --iters " + std::to_string(iters);
  }

  // Nothing of the demo's fabric is left: no namespace, no record, no interface in this
  // namespace that was not there before, no rank still running.
  void expect_nothing_left() {
    EXPECT_TRUE(net::netns_with_prefix("tf-demo-").empty());
    EXPECT_FALSE(fabric::load_record("demo").has_value());
    EXPECT_EQ(host_interfaces(), interfaces_before_);
    EXPECT_TRUE(demo_bench_processes().empty());
  }

  // Starts the demo in a process group of its own, output to a file; returns its pid.
  pid_t start_demo(const std::string& command) {
    const std::string log = (dir_ / "demo.log").string();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >" + log + " 2>&1").c_str(), nullptr);
      _exit(127);
    }
    ::setpgid(pid, pid);
    return pid;
  }

  // Waits until the bench's launcher and all 16 ranks run (their output is buffered, so
  // the processes tell), or `seconds`.
  bool wait_for_ranks(int seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until) {
      if (demo_bench_processes().size() >= 17) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // The exit status of `pid` (128 + signal when killed), or -1 after `seconds`.
  static int wait_exit(pid_t pid, int seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return -1;
  }

  // Interrupts a run of the demo mid-bench with `signal`, sent to its process group (a
  // terminal's Ctrl-C) or to the demo alone; returns its exit status and output.
  std::pair<int, std::string> interrupt_mid_run(int signal, bool whole_group) {
    // 1M at 20 Mbit/s: the rank-order ring alone takes over 3 s an iteration.
    const pid_t pid = start_demo(demo_command("1M", 3));
    const bool started = wait_for_ranks(60);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // ranks mid-allreduce
    EXPECT_TRUE(started) << slurp(dir_ / "demo.log");
    ::kill(whole_group ? -pid : pid, signal);
    const int status = wait_exit(pid, 60);
    const std::string output = slurp(dir_ / "demo.log");
    EXPECT_EQ(output.find("# Out of bounds values"), std::string::npos) << "the bench had finished:\n" << output;
    return {status, output};
  }

  fs::path dir_;
  std::set<std::string> interfaces_before_;
};

TEST_F(DemoOnFabric, MeasuresEveryAlgorithmChecksEveryResultAndLeavesNothing) {
  const auto r = shell_run(demo_command("16K,32K", 1));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("=== 5. run the allreduces on an emulated network"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("no emulated fabric"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing left behind"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("meas/pred"), std::string::npos) << r.output;  // the table
  EXPECT_NE(r.output.find("contention: ring (link load 4) takes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("contention: hd-naive (link load 8) takes"), std::string::npos) << r.output;
  std::ifstream in(dir_ / "out" / "demo-fabric-bench.json");
  ASSERT_TRUE(in) << r.output;
  const auto rows = nlohmann::json::parse(in);
  ASSERT_EQ(rows.size(), 8u) << rows.dump();
  std::map<std::string, double> load;
  for (const auto& row : rows) {
    EXPECT_EQ(row["wrong"], 0) << row.dump();
    EXPECT_EQ(row["ranks"], 16) << row.dump();
    EXPECT_GT(row["predicted_us"].get<double>(), 0) << row.dump();
    load[row["algo"]] = row["max_link_load"];
  }
  EXPECT_EQ(load, (std::map<std::string, double>{{"ring", 4}, {"ring-topo", 1}, {"hd-naive", 8}, {"hd", 2}}));
  EXPECT_NE(slurp(dir_ / "out" / "demo-results.md").find("| 32K | ring-topo | 1 |"), std::string::npos);
  const std::string svg = slurp(dir_ / "out" / "demo-measured-vs-predicted.svg");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("emulated at 20 Mbit/s"), std::string::npos);
  expect_nothing_left();
}

TEST_F(DemoOnFabric, CtrlCMidRunTakesTheFabricDown) {
  const auto [status, output] = interrupt_mid_run(SIGINT, true);
  EXPECT_EQ(status, 128 + SIGINT) << output;
  EXPECT_NE(output.find("interrupted by SIGINT"), std::string::npos) << output;
  EXPECT_NE(output.find("nothing left behind"), std::string::npos) << output;
  expect_nothing_left();
}

TEST_F(DemoOnFabric, SigtermToTheDemoAloneTakesTheFabricAndItsRanksDown) {
  const auto [status, output] = interrupt_mid_run(SIGTERM, false);
  EXPECT_EQ(status, 128 + SIGTERM) << output;
  EXPECT_NE(output.find("interrupted by SIGTERM"), std::string::npos) << output;
  expect_nothing_left();
}

TEST_F(DemoOnFabric, AccessIsRefusedToASecondDemoAndBesideAFabricOfItsName) {
  const auto t = topo::load_topology_file(kExamples + "bigraph-32.json");
  {
    const auto first = DemoFabricAccess::check(t, "demotest");
    ASSERT_TRUE(first.granted()) << first.reason();
    const auto second = DemoFabricAccess::check(t, "demotest");
    EXPECT_FALSE(second.granted());
    EXPECT_NE(second.reason().find("another `topocoll demo` (pid " + std::to_string(::getpid()) + ")"),
              std::string::npos)
        << second.reason();
  }
  fabric::FabricRecord record;
  record.name = "demotest";
  record.status = "up";
  fabric::save_record(record);
  const auto beside = DemoFabricAccess::check(t, "demotest");
  fabric::remove_record("demotest");
  EXPECT_FALSE(beside.granted());
  EXPECT_NE(beside.reason().find("`topocoll fabric down --name demotest` removes it"), std::string::npos)
      << beside.reason();
  EXPECT_TRUE(DemoFabricAccess::check(t, "demotest").granted());
}

}  // namespace
}  // namespace topocoll::cli
