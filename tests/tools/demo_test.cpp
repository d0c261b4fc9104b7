// The demo off the fabric (label unit): its results (table, contention and deviation lines,
// chart), the fabric access check refusing an unprivileged user in one line, and the whole
// demo run as that user — the one-line reason, then the loopback step with every result
// checked — and with --loopback.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tests/common/shell_run.h"
#include "tools/demo_fabric_access.h"
#include "tools/demo_results.h"
#include "tools/file_stem.h"
#include "topo/topology_json.h"

namespace topocoll::cli {
namespace {

namespace fs = std::filesystem;
using testing_support::shell_run;

const std::string kCli = std::string(TOPOCOLL_BINARY_DIR) + "/tools/topocoll";
const std::string kTopology = std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json";
constexpr uid_t kNobody = 65534;

std::vector<DemoMeasurement> fabric_like_rows() {
  return {{"ring", 65536, 204000, 196800, 4, 0},   {"ring-topo", 65536, 50300, 49400, 1, 0},
          {"hd-naive", 65536, 137000, 150800, 8, 0}, {"hd", 65536, 100000, 98400, 2, 0},
          {"ring", 262144, 802000, 786600, 4, 0},  {"ring-topo", 262144, 199000, 196800, 1, 0},
          {"hd-naive", 262144, 647000, 603000, 8, 0}, {"hd", 262144, 450000, 393300, 2, 0}};
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DemoResults, ContentionLineGivesMeasuredAndPredictedRatiosOverTheSizes) {
  const auto rows = fabric_like_rows();
  EXPECT_EQ(contention_line(rows, "ring", "ring-topo"),
            "ring (link load 4) takes 4.0-4.1x as long as ring-topo (load 1); the model says 4.0x");
  EXPECT_EQ(contention_line(rows, "hd-naive", "hd"),
            "hd-naive (link load 8) takes 1.4x as long as hd (load 2); the model says 1.5x");
  EXPECT_EQ(contention_line(rows, "ring", "fc"), "");  // fc did not run
}

TEST(DemoResults, DeviationLineNamesTheLargestOrEveryCaseOutside) {
  const auto rows = fabric_like_rows();
  EXPECT_EQ(deviation_line(rows, 0.20),
            "every algorithm within 20 % of its prediction (largest: hd at 256K, +14.4 %)");
  EXPECT_EQ(deviation_line(rows, 0.10), "1 of 8 cases more than 10 % off their prediction: hd at 256K +14 %");
}

TEST(DemoResults, TableAndChartCarryEveryCase) {
  const auto rows = fabric_like_rows();
  const std::string table = measurement_table(rows, false);
  EXPECT_NE(table.find("meas/pred"), std::string::npos) << table;
  EXPECT_NE(table.find("256K   hd-naive         8        603.00       647.00       1.07       0"),
            std::string::npos) << table;
  const std::string md = measurement_table(rows, true);
  EXPECT_NE(md.find("| 64K | ring | 4 | 196.80 | 204.00 | 1.04 | 0 |"), std::string::npos) << md;
  const std::string svg = measurement_chart(rows, "title <&>", 0.2);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("title &lt;&amp;&gt;"), std::string::npos);
  for (const char* algo : {">ring<", ">ring-topo<", ">hd-naive<", ">hd<", ">predicted<"})
    EXPECT_NE(svg.find(algo), std::string::npos) << algo;
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // the predictions
}

TEST(DemoResults, ReadingAMissingBenchFileNamesIt) {
  try {
    read_bench_rows("/nonexistent/demo-bench.json");
    FAIL() << "no exception";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/demo-bench.json"), std::string::npos) << e.what();
  }
}

TEST(DemoFabricAccess, RefusedCarriesItsReason) {
  const auto a = DemoFabricAccess::refused("--loopback given");
  EXPECT_FALSE(a.granted());
  EXPECT_EQ(a.reason(), "--loopback given");
}

// Checked in a child process that is (or becomes) an unprivileged user: the reason is one
// line and says root is needed, before any namespace is tried.
TEST(DemoFabricAccess, AnUnprivilegedUserIsToldInOneLineThatRootIsNeeded) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    if (::geteuid() == 0 && (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0))
      _exit(3);
    const auto a = DemoFabricAccess::check(topo::load_topology_file(kTopology), "demotest");
    const std::string text = (a.granted() ? "granted" : "refused: ") + a.reason();
    [[maybe_unused]] const ssize_t n = ::write(fds[1], text.data(), text.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(got.rfind("refused: a fabric needs root", 0), 0u) << got;
  EXPECT_EQ(got.find('\n'), std::string::npos) << got;
}

// The demo's binary and topology in a directory any user can read, and an output directory
// any user can write: the build tree may sit where an unprivileged user cannot reach.
class DemoAsUnprivilegedUser : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("demo-unprivileged-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "out");
    fs::copy_file(kCli, dir_ / "topocoll");
    fs::copy_file(kTopology, dir_ / "bigraph-32.json");
    for (const auto& p : {dir_, dir_ / "out"}) fs::permissions(p, fs::perms::all);
    if (::geteuid() == 0) {
      if (shell_run("command -v setpriv").status != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
      as_user_ = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  testing_support::ShellResult demo(const std::string& extra) {
    return shell_run("cd " + dir_.string() + " && " + as_user_ + "./topocoll demo --topo bigraph-32.json --out " +
                     (dir_ / "out").string() + " --sizes 64K --iters 2" + extra);
  }

  // The lines of `text` that start with `prefix`.
  static std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0) out.push_back(line);
    return out;
  }

  void expect_loopback_results(const testing_support::ShellResult& r) {
    EXPECT_NE(r.output.find("processes over the socket transport on this machine"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("not the modelled fabric"), std::string::npos) << r.output;  // the explanation
    EXPECT_EQ(r.output.find("emulated network: namespaces"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("wrong elements: 0"), std::string::npos) << r.output;
    std::ifstream in(dir_ / "out" / "demo-bench.json");
    ASSERT_TRUE(in) << r.output;
    const auto rows = nlohmann::json::parse(in);
    ASSERT_EQ(rows.size(), 3u) << rows.dump();
    for (const auto& row : rows) {
      EXPECT_EQ(row["wrong"], 0) << row.dump();
      EXPECT_EQ(row["bytes"], 65536) << row.dump();
      EXPECT_GT(row["predicted_us"].get<double>(), 0) << row.dump();
    }
    EXPECT_NE(slurp(dir_ / "out" / "demo-results.md").find("| 64K | hd |"), std::string::npos);
    EXPECT_NE(slurp(dir_ / "out" / "demo-measured-vs-predicted.svg").find("</svg>"), std::string::npos);
  }

  fs::path dir_;
  std::string as_user_;
};

TEST_F(DemoAsUnprivilegedUser, SaysWhyInOneLineThenMeasuresOverLoopback) {
  const auto r = demo("");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto reasons = lines_starting(r.output, "  no emulated fabric: ");
  ASSERT_EQ(reasons.size(), 1u) << r.output;
  EXPECT_NE(reasons[0].find("a fabric needs root"), std::string::npos) << reasons[0];
  EXPECT_NE(reasons[0].find("; measuring over loopback instead"), std::string::npos) << reasons[0];
  expect_loopback_results(r);
}

TEST_F(DemoAsUnprivilegedUser, LoopbackSwitchSaysSo) {
  const auto r = demo(" --loopback");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto reasons = lines_starting(r.output, "  no emulated fabric: ");
  ASSERT_EQ(reasons.size(), 1u) << r.output;
  EXPECT_EQ(reasons[0], "  no emulated fabric: --loopback given; measuring over loopback instead");
  expect_loopback_results(r);
}

// A bad --sizes was found only at step 5 (after a fabric was built); --ranks above the
// topology's endpoints was clamped without a word. Both are refused before step 1 now.
TEST(Demo, RefusesBadSizesAndTooManyRanksBeforeAnyStep) {
  const std::string topo = std::string(TOPOCOLL_SOURCE_DIR) + "/examples/bigraph-32.json";
  const std::string out = ::testing::TempDir() + "demo-refusals";
  const auto sizes = shell_run(kCli + " demo --loopback --topo " + topo + " --out " + out + " --sizes 64K,1Q");
  EXPECT_NE(sizes.status, 0) << sizes.output;
  EXPECT_NE(sizes.output.find("--sizes"), std::string::npos) << sizes.output;
  EXPECT_EQ(sizes.output.find("1. validate"), std::string::npos) << sizes.output;
  const auto range = shell_run(kCli + " demo --loopback --topo " + topo + " --out " + out + " --sizes 1M:64K");
  EXPECT_NE(range.status, 0) << range.output;
  EXPECT_NE(range.output.find("--sizes '1M:64K': need 1 <= A <= B"), std::string::npos) << range.output;
  const auto ranks = shell_run(kCli + " demo --loopback --topo " + topo + " --out " + out + " --ranks 33");
  EXPECT_NE(ranks.status, 0) << ranks.output;
  EXPECT_NE(ranks.output.find("--ranks 33: bigraph-32 has 32 endpoints"), std::string::npos) << ranks.output;
  EXPECT_EQ(ranks.output.find("5. run"), std::string::npos) << ranks.output;
}

TEST(Demo, TheDrawingsNameStaysInsideTheOutputDirectory) {
  // The topology's "name" made the drawing's path: "../escaped" wrote beside --out.
  EXPECT_EQ(file_stem("bigraph-32"), "bigraph-32");
  EXPECT_EQ(file_stem("../escaped"), "_._escaped");
  EXPECT_EQ(file_stem("/etc/passwd"), "_etc_passwd");
  EXPECT_EQ(file_stem(".."), "_.");
  EXPECT_EQ(file_stem("a b\tc"), "a_b_c");
  EXPECT_EQ(file_stem(""), "topology");
}

}  // namespace
}  // namespace topocoll::cli
